//! Validates a results folder: every figure's JSON parses into its schema,
//! has the expected configurations, and holds finite, positive numbers where
//! a measurement must be; every plot is a non-trivial PNG. It checks that
//! results are well-formed, never how fast anything was.

use std::path::Path;

use crate::error::{BenchError, Result};
use crate::results::{
    self, LargeFigure, MemoryFigure, Meta, Paths, ScalingFigure, StallFigure, SyncFigure, TransportFigure,
};
use crate::scaling::{System, MACHINES, NETWORKS_GBPS};
use crate::stall::SLACKS;
use crate::sync::{ENGINE, RING, WORLDS};
use crate::trainer::Mode;

pub const FIGURES: [&str; 6] = ["transport", "sync", "scaling", "stall", "memory", "large"];

struct Problems(Vec<String>);

impl Problems {
    fn positive(&mut self, what: &str, v: f64) {
        if !(v.is_finite() && v > 0.0) {
            self.0.push(format!("{what} is {v}, expected a finite positive number"));
        }
    }

    fn fraction(&mut self, what: &str, v: f64) {
        if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
            self.0.push(format!("{what} is {v}, expected a fraction in [0, 1]"));
        }
    }

    fn require(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
}

fn meta(p: &mut Problems, figure: &str, m: &Meta) {
    p.positive(&format!("{figure}: calibration raw TCP rate"), m.calibration.raw_tcp_bytes_per_second);
    p.positive(&format!("{figure}: host factor"), m.calibration.host_factor);
    p.require(m.machine.cpus > 0 && m.workers > 0 && m.repeats > 0, || format!("{figure}: empty metadata"));
}

fn stall(p: &mut Problems, f: &StallFigure) {
    meta(p, "stall", &f.meta);
    p.require(f.models.len() == 2, || format!("stall: {} models, expected AdamLike and GoogLeNet", f.models.len()));
    for m in &f.models {
        p.require(m.rows.len() == Mode::ALL.len() * SLACKS.len(), || {
            format!("stall: {} has {} configurations, expected 9", m.model, m.rows.len())
        });
        for mode in Mode::ALL {
            for slack in SLACKS {
                let found = m.rows.iter().any(|r| r.config == mode.label() && r.slack == slack);
                p.require(found, || format!("stall: {} lacks {} at {slack:?}", m.model, mode.label()));
            }
        }
        for r in &m.rows {
            let what = format!("stall: {} {} {}", m.model, r.config, r.slack_label);
            p.positive(&format!("{what} compute_ms"), r.compute_ms);
            p.require(r.stall_ms.is_finite() && r.stall_ms >= 0.0, || format!("{what} stall_ms is {}", r.stall_ms));
            p.fraction(&format!("{what} stall_fraction"), r.stall_fraction);
            p.fraction(&format!("{what} geeps_blocked_fraction"), r.geeps_blocked_fraction);
            p.require(r.stall_fraction_samples.len() == f.meta.repeats, || format!("{what}: sample count"));
        }
    }
}

fn stall_sweep(p: &mut Problems, f: &StallFigure) {
    for x in &f.sweep {
        let what = format!("stall sweep: {} at host factor {}", x.model, x.host_factor);
        p.positive(&format!("{what} host factor"), x.host_factor);
        p.positive(&format!("{what} compute_ms"), x.compute_ms);
        p.fraction(&format!("{what} stall_fraction"), x.stall_fraction);
        p.require(x.stall_fraction_samples.len() == f.meta.repeats, || format!("{what}: sample count"));
    }
}

fn memory(p: &mut Problems, f: &MemoryFigure) {
    meta(p, "memory", &f.meta);
    p.require(f.points.len() >= 3, || format!("memory: {} budgets, expected at least 3", f.points.len()));
    p.require(f.minimum_bytes > 0 && f.minimum_bytes < f.everything_fits_bytes, || {
        format!("memory: minimum {} not below everything-fits {}", f.minimum_bytes, f.everything_fits_bytes)
    });
    p.require(f.points.iter().any(|x| (x.fraction - 1.0).abs() < 1e-6 && (x.relative - 1.0).abs() < 1e-9), || {
        "memory: no everything-fits point at 1.0x".into()
    });
    p.require(f.points.iter().any(|x| x.budget_bytes == f.minimum_bytes), || "memory: no point at the minimum".into());
    for x in &f.points {
        let what = format!("memory: budget {}", x.budget_bytes);
        p.positive(&format!("{what} relative"), x.relative);
        p.positive(&format!("{what} images/s"), x.paper_equivalent_images_per_second);
        p.fraction(&format!("{what} stall_fraction"), x.stall_fraction);
        p.require(x.plan.budget == x.budget_bytes, || format!("{what}: plan is for {} B", x.plan.budget));
    }
}

fn large(p: &mut Problems, f: &LargeFigure) {
    meta(p, "large", &f.meta);
    p.require(f.points.len() >= 2, || format!("large: {} models, expected at least 2", f.points.len()));
    p.require(f.points.iter().any(|x| x.fits), || "large: no model fits the budget".into());
    p.require(f.points.iter().any(|x| !x.fits), || "large: every model fits the budget".into());
    for x in &f.points {
        let what = format!("large: {} layers", x.layers);
        p.positive(&format!("{what} relative"), x.relative);
        p.positive(&format!("{what} connections/s"), x.paper_equivalent_connections_per_second);
        p.fraction(&format!("{what} stall_fraction"), x.stall_fraction);
    }
}

fn transport(p: &mut Problems, f: &TransportFigure) {
    meta(p, "transport", &f.meta);
    p.require(f.rows.len() == 4, || format!("transport: {} rows, expected 4", f.rows.len()));
    for r in &f.rows {
        let what = format!("transport: {} {} workers", r.transport, r.workers);
        p.positive(&format!("{what} baseline"), r.baseline_bytes_per_second);
        p.positive(&format!("{what} engine"), r.engine_bytes_per_second);
        p.positive(&format!("{what} ratio"), r.ratio);
    }
}

fn sync(p: &mut Problems, f: &SyncFigure) {
    meta(p, "sync", &f.meta);
    // The worlds the figure was asked for (`--sync-ranks`), or the default ones.
    let mut worlds: Vec<usize> = f.rows.iter().map(|r| r.workers).collect();
    worlds.sort_unstable();
    worlds.dedup();
    if worlds.is_empty() {
        worlds = WORLDS.to_vec();
    }
    for workers in worlds {
        for system in [ENGINE, RING] {
            let found = f.rows.iter().any(|r| r.workers == workers && r.system == system);
            p.require(found, || format!("sync: no {system} row at {workers} ranks"));
        }
    }
    for r in &f.rows {
        let what = format!("sync: {} at {} ranks", r.system, r.workers);
        p.positive(&format!("{what} ms per clock"), r.ms_per_clock);
        p.positive(&format!("{what} engine ratio"), r.engine_over_this);
        p.require(r.samples_ms.len() == f.meta.repeats, || format!("{what}: sample count"));
        if let Some(b) = r.bytes_per_rank_per_clock {
            p.positive(&format!("{what} bytes per clock"), b);
        }
    }
}

fn scaling(p: &mut Problems, f: &ScalingFigure) {
    meta(p, "scaling", &f.meta);
    p.positive("scaling: compute ms", f.compute_ms);
    for system in System::ALL {
        let label = system.label();
        p.require(f.points.iter().filter(|x| x.system == label).count() >= 4, || {
            format!("scaling: fewer than 4 measured points of {label} (2 and 4 ranks at two sizes)")
        });
        match f.fits.iter().find(|x| x.system == label) {
            Some(fit) => {
                let coefficients = [fit.latency_s, fit.cpu_s_per_byte, fit.wire_s_per_byte];
                p.require(coefficients.iter().all(|v| v.is_finite() && *v >= 0.0), || {
                    format!("scaling: {label} fit {coefficients:?}, expected finite non-negative coefficients")
                });
            }
            None => p.0.push(format!("scaling: no fit of {label}")),
        }
        for gbps in NETWORKS_GBPS {
            for overlap in [true, false] {
                for n in MACHINES {
                    let row = f.rows.iter().find(|r| {
                        r.system == label && r.network_gbps == gbps && r.overlap == overlap && r.machines == n
                    });
                    let what = format!("scaling: {label} on {gbps} Gb/s, {n} machines, overlap {overlap}");
                    match row {
                        Some(r) => {
                            p.positive(&format!("{what} ms per clock"), r.ms_per_clock);
                            p.require(r.speedup > 0.0 && r.speedup <= n as f64 * (1.0 + 1e-9), || {
                                format!("{what}: speedup {}, expected in (0, {n}]", r.speedup)
                            });
                        }
                        None => p.0.push(format!("{what}: missing")),
                    }
                }
            }
        }
    }
    for x in &f.points {
        let what = format!("scaling: {} at {} ranks, {} bytes", x.system, x.workers, x.table_bytes);
        p.positive(&format!("{what} ms per clock"), x.ms_per_clock);
        p.require(x.samples_ms.len() == f.meta.repeats, || format!("{what}: sample count"));
        p.require(x.oversubscription >= 1.0, || {
            format!("{what}: oversubscription {}, expected >= 1", x.oversubscription)
        });
    }
}

fn png(p: &mut Problems, path: &Path) {
    match std::fs::read(path) {
        Ok(bytes) => p.require(bytes.len() > 2_000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n"), || {
            format!("{}: not a plot ({} bytes)", path.display(), bytes.len())
        }),
        Err(e) => p.0.push(format!("{}: {e}", path.display())),
    }
}

/// Checks every figure in `dir`; the error lists every problem found.
pub fn run(dir: &Path) -> Result<()> {
    let paths = Paths { dir: dir.to_path_buf() };
    let mut p = Problems(Vec::new());
    for figure in FIGURES {
        png(&mut p, &paths.png(figure));
    }
    match results::read(&paths.json("stall")) {
        Ok(f) => {
            stall(&mut p, &f);
            stall_sweep(&mut p, &f);
        }
        Err(e) => p.0.push(e.to_string()),
    }
    match results::read(&paths.json("memory")) {
        Ok(f) => memory(&mut p, &f),
        Err(e) => p.0.push(e.to_string()),
    }
    match results::read(&paths.json("large")) {
        Ok(f) => large(&mut p, &f),
        Err(e) => p.0.push(e.to_string()),
    }
    match results::read(&paths.json("transport")) {
        Ok(f) => transport(&mut p, &f),
        Err(e) => p.0.push(e.to_string()),
    }
    match results::read(&paths.json("sync")) {
        Ok(f) => sync(&mut p, &f),
        Err(e) => p.0.push(e.to_string()),
    }
    match results::read(&paths.json("scaling")) {
        Ok(f) => scaling(&mut p, &f),
        Err(e) => p.0.push(e.to_string()),
    }
    if p.0.is_empty() {
        Ok(())
    } else {
        Err(BenchError::msg(format!("{} problem(s) in {}:\n  {}", p.0.len(), dir.display(), p.0.join("\n  "))))
    }
}

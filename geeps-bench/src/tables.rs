//! Markdown tables of a results folder, as `docs/performance.md` shows
//! them, so the document is pasted from the JSON rather than retyped. It
//! reads results only; it never measures or judges.

use std::fmt::Write;
use std::path::Path;

use crate::error::Result;
use crate::large::worst_large;
use crate::memory::at_target;
use crate::results::{
    self, LargeFigure, MemoryFigure, Meta, Paths, ScalingFigure, StallFigure, SyncFigure, TransportFigure,
};

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn meta_line(out: &mut String, m: &Meta) {
    let _ = writeln!(
        out,
        "Machine: {} × {}, {:.0} GiB, Linux {}; {} worker processes; {} repeat(s), medians; load average {:.1} when it finished. \
         Raw TCP {:.0} MB/s per rank (in + out) → host factor {:.2}.\n",
        m.machine.cpus,
        m.machine.cpu_model,
        m.machine.memory_gib,
        m.machine.kernel,
        m.workers,
        m.repeats,
        m.load_average[0],
        m.calibration.raw_tcp_bytes_per_second / 1e6,
        m.calibration.host_factor
    );
}

fn stall(out: &mut String, f: &StallFigure) {
    let _ = writeln!(out, "#### Stall time (Figure 14)\n");
    meta_line(out, &f.meta);
    for m in &f.models {
        let _ = writeln!(
            out,
            "{}: {} layers, {:.1} MB of parameters, {:.1} MB of local data per worker (bytes ×{}); \
             {:.0} ms of emulated compute per mini-batch.\n",
            m.model,
            m.layers,
            mb(m.param_bytes),
            mb(m.local_bytes),
            m.scale.bytes,
            m.nominal_compute_ms
        );
        let _ = writeln!(
            out,
            "| configuration | slack | compute ms | stall ms | stall | longest wait (ms per mini-batch) |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for r in &m.rows {
            let wait = r.longest_waits_ms.first().map(|(s, t)| format!("{s} ({t:.1})")).unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.0} | **{:.1}%** | {} |",
                r.config,
                r.slack.map(|s| s.to_string()).unwrap_or_else(|| "∞".into()),
                r.compute_ms,
                r.stall_ms,
                r.stall_fraction * 100.0,
                wait
            );
        }
        let _ = writeln!(out);
    }
    if !f.sweep.is_empty() {
        let _ = writeln!(
            out,
            "GeePS under BSP at other host factors (the headline above is at this run's calibration, {:.2}):\n",
            f.meta.calibration.host_factor
        );
        let _ = writeln!(out, "| model | host factor | of the calibrated | compute ms | stall ms | stall |");
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for p in &f.sweep {
            let _ = writeln!(
                out,
                "| {} | {:.2} | {}× | {:.0} | {:.0} | **{:.1}%** |",
                p.model,
                p.host_factor,
                p.of_calibrated,
                p.compute_ms,
                p.stall_ms,
                p.stall_fraction * 100.0
            );
        }
        let _ = writeln!(out);
    }
}

fn memory(out: &mut String, f: &MemoryFigure) {
    let _ = writeln!(out, "#### Memory budget (Figure 12)\n");
    meta_line(out, &f.meta);
    let _ = writeln!(
        out,
        "{} (bytes ×{}): everything fits in {:.1} MB; the planner accepts down to {:.1} MB ({:.0}%).\n",
        f.model,
        f.scale.bytes,
        mb(f.everything_fits_bytes),
        mb(f.minimum_bytes),
        f.minimum_bytes as f64 / f.everything_fits_bytes as f64 * 100.0
    );
    let _ = writeln!(
        out,
        "| budget MB | of everything-fits | params on device | local data on device | double-buffered | stall | throughput |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for p in &f.points {
        let on = |d: usize, h: usize| if d + h == 0 { 100.0 } else { d as f64 / (d + h) as f64 * 100.0 };
        let _ = writeln!(
            out,
            "| {:.1} | {:.0}% | {:.0}% | {:.0}% | {} | {:.1}% | **{:.2}×** |",
            mb(p.budget_bytes),
            p.fraction * 100.0,
            on(p.plan.param_device_bytes, p.plan.param_host_bytes),
            on(p.plan.local_device_bytes, p.plan.local_host_bytes),
            if p.plan.double_buffered { "yes" } else { "no" },
            p.stall_fraction * 100.0,
            p.relative
        );
    }
    if let Some(v) = at_target(f) {
        let _ = writeln!(
            out,
            "\nAt {:.0}% of the memory: **{v:.2}×** (target ≥ {:.2}×, paper {:.2}×).",
            f.target_fraction * 100.0,
            f.target_relative,
            f.paper_relative
        );
    }
    let _ = writeln!(out);
}

fn large(out: &mut String, f: &LargeFigure) {
    let _ = writeln!(out, "#### Large models (Figure 13)\n");
    meta_line(out, &f.meta);
    let _ = writeln!(
        out,
        "Device budget {:.1} MB (the K20's 5 GB ×{}); {:.2} MB of weights per layer; batch {}.\n",
        mb(f.device_memory),
        f.scale.bytes,
        mb(f.layer_param_bytes),
        f.batch
    );
    let _ = writeln!(out, "| layers | parameters MB | parameters / budget | all on device | stall | connections/s |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for p in &f.points {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.2}× | {} | {:.1}% | **{:.2}×** |",
            p.layers,
            mb(p.param_bytes),
            p.params_over_budget,
            if p.fits { "yes" } else { "no" },
            p.stall_fraction * 100.0,
            p.relative
        );
    }
    if let Some(v) = worst_large(f) {
        let _ = writeln!(
            out,
            "\nRelative to {} layer(s); worst with parameters ≥ 2× the budget: **{v:.2}×** (target ≥ {:.2}×).",
            f.reference_layers, f.target_relative
        );
    }
    let _ = writeln!(out);
}

fn transport(out: &mut String, f: &TransportFigure) {
    let _ = writeln!(out, "#### Transport\n");
    meta_line(out, &f.meta);
    let _ = writeln!(
        out,
        "BSP clock exchange of a {} MiB table, {} clocks; bytes/s per worker, in + out.\n",
        f.table_bytes >> 20,
        f.clocks
    );
    let _ = writeln!(out, "| transport | workers | baseline | baseline MB/s | engine MB/s | engine / baseline |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in &f.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | **{:.2}×** |",
            r.transport,
            r.workers,
            r.baseline,
            r.baseline_bytes_per_second / 1e6,
            r.engine_bytes_per_second / 1e6,
            r.ratio
        );
    }
    let _ = writeln!(out);
}

fn sync(out: &mut String, f: &SyncFigure) {
    let _ = writeln!(out, "#### Sync\n");
    meta_line(out, &f.meta);
    let _ = writeln!(
        out,
        "One BSP clock of a {:.1} MB table (update, then read the sum), {} clocks per run; \
         time per clock of the slowest rank; TCP bytes per rank per clock as the kernel counted them.\n",
        mb(f.table_bytes),
        f.clocks
    );
    let _ = writeln!(out, "| ranks | system | ms per clock | engine / this | bytes per rank per clock | a ring's |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in &f.rows {
        let bytes =
            r.bytes_per_rank_per_clock.map_or("—".to_string(), |b| format!("{:.2}·S", b / f.table_bytes as f64));
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | **{:.2}×** | {bytes} | {:.2}·S |",
            r.workers,
            r.system,
            r.ms_per_clock,
            r.engine_over_this,
            crate::sync::ring_bytes(r.workers, f.table_bytes) / f.table_bytes as f64
        );
    }
    for line in &f.skipped {
        let _ = writeln!(out, "\n{line}");
    }
    let _ = writeln!(out);
}

fn scaling(out: &mut String, f: &ScalingFigure) {
    let _ = writeln!(out, "#### Scaling model\n");
    meta_line(out, &f.meta);
    let _ = writeln!(out, "| ranks | table MB | system | ms per clock | ranks per core | model ms |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for x in &f.points {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {:.1} | {:.1} | {:.1} |",
            x.workers,
            mb(x.table_bytes),
            x.system,
            x.ms_per_clock,
            x.oversubscription,
            x.model_ms
        );
    }
    let _ = writeln!(
        out,
        "\n| system | a: ms per hop | c: ns per table byte | w: ns per byte sent (loopback) | RMS residual ms |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for x in &f.fits {
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.3} | {:.3} | {:.1} |",
            x.system,
            x.latency_s * 1e3,
            x.cpu_s_per_byte * 1e9,
            x.wire_s_per_byte * 1e9,
            x.rms_residual_ms
        );
    }
    let _ = writeln!(
        out,
        "\nProjected speedup (ms per clock) for a {:.1} MB table and {:.0} ms of compute per clock ({}):\n",
        mb(f.table_bytes),
        f.compute_ms,
        f.compute_source
    );
    let machines = crate::scaling::MACHINES;
    let head: Vec<String> = machines.iter().map(|n| n.to_string()).collect();
    let _ = writeln!(out, "| system | link | overlap | {} |", head.join(" | "));
    let _ = writeln!(out, "|---|---|---|{}", "---|".repeat(machines.len()));
    let mut keys: Vec<(&str, f64, bool)> = Vec::new();
    for r in &f.rows {
        if !keys.iter().any(|k| k.0 == r.system && k.1 == r.network_gbps && k.2 == r.overlap) {
            keys.push((&r.system, r.network_gbps, r.overlap));
        }
    }
    for (system, gbps, overlap) in keys {
        let cells: Vec<String> = machines
            .iter()
            .map(|&n| {
                f.rows
                    .iter()
                    .find(|r| r.system == system && r.network_gbps == gbps && r.overlap == overlap && r.machines == n)
                    .map_or("—".into(), |r| format!("{:.2}× ({:.0})", r.speedup, r.ms_per_clock))
            })
            .collect();
        let _ = writeln!(
            out,
            "| {system} | {gbps} Gb/s | {} | {} |",
            if overlap { "yes" } else { "no" },
            cells.join(" | ")
        );
    }
    let _ = writeln!(out, "\nThe paper: {}.\n", f.paper_setting);
}

/// Prints every figure's table found in `dir`.
pub fn run(dir: &Path) -> Result<()> {
    let paths = Paths { dir: dir.to_path_buf() };
    let mut out = String::new();
    if let Ok(f) = results::read::<TransportFigure>(&paths.json("transport")) {
        transport(&mut out, &f);
    }
    if let Ok(f) = results::read::<SyncFigure>(&paths.json("sync")) {
        sync(&mut out, &f);
    }
    if let Ok(f) = results::read::<ScalingFigure>(&paths.json("scaling")) {
        scaling(&mut out, &f);
    }
    if let Ok(f) = results::read::<StallFigure>(&paths.json("stall")) {
        stall(&mut out, &f);
    }
    if let Ok(f) = results::read::<MemoryFigure>(&paths.json("memory")) {
        memory(&mut out, &f);
    }
    if let Ok(f) = results::read::<LargeFigure>(&paths.json("large")) {
        large(&mut out, &f);
    }
    print!("{out}");
    Ok(())
}

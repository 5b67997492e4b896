//! Reads the figures' results against their targets and prints one line
//! per target. Missing a target is reported, never an error: timings on a
//! shared machine are figures, not assertions.

use crate::large::worst_large;
use crate::memory::at_target;
use crate::results::{LargeFigure, MemoryFigure, ScalingFigure, StallFigure, SyncFigure, TransportFigure};
use crate::trainer::Mode;

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

pub fn stall(f: &StallFigure) {
    for m in &f.models {
        if let Some(r) = m.rows.iter().find(|r| r.config == Mode::PerLayer.label() && r.slack == Some(0)) {
            println!(
                "  stall (Figure 14), {} GeePS BSP at the {} host factor {:.2}: {:.1}% stall (target <= {:.0}%, paper {:.0}%): {}",
                m.model,
                calibration_source(f),
                f.meta.calibration.host_factor,
                r.stall_fraction * 100.0,
                f.target_stall_fraction * 100.0,
                f.paper_stall_fraction * 100.0,
                verdict(r.stall_fraction <= f.target_stall_fraction)
            );
        }
        if let Some(r) = m.rows.iter().find(|r| r.config == Mode::CpuPs.label() && r.slack == Some(0)) {
            println!("  stall (Figure 14), {} CPU-PS BSP: {:.1}% stall", m.model, r.stall_fraction * 100.0);
        }
    }
    for p in &f.sweep {
        println!(
            "  stall sweep, {} GeePS BSP at host factor {:.2} ({}x the calibrated): {:.1}% stall",
            p.model,
            p.host_factor,
            p.of_calibrated,
            p.stall_fraction * 100.0
        );
    }
}

pub fn memory(f: &MemoryFigure) {
    match at_target(f) {
        Some(v) => println!(
            "  memory (Figure 12): {:.2}x throughput at {:.0}% of everything-fits (target >= {:.2}x, paper {:.2}x): {}",
            v,
            f.target_fraction * 100.0,
            f.target_relative,
            f.paper_relative,
            verdict(v >= f.target_relative)
        ),
        None => println!("  memory (Figure 12): no measured budgets around {:.0}%", f.target_fraction * 100.0),
    }
    println!(
        "  memory (Figure 12): smallest accepted budget {:.0}% of everything-fits",
        f.minimum_bytes as f64 / f.everything_fits_bytes as f64 * 100.0
    );
}

pub fn large(f: &LargeFigure) {
    match worst_large(f) {
        Some(v) => println!(
            "  large models (Figure 13): worst {:.2}x connections/s with parameters >= 2x the budget (target >= {:.2}x): {}",
            v,
            f.target_relative,
            verdict(v >= f.target_relative)
        ),
        None => println!("  large models (Figure 13): no model with parameters >= 2x the budget"),
    }
}

pub fn transport(f: &TransportFigure) {
    for r in &f.rows {
        println!(
            "  transport, {} x{}: engine {:.0} MB/s = {:.2}x {}",
            r.transport,
            r.workers,
            r.engine_bytes_per_second / 1e6,
            r.ratio,
            r.baseline
        );
    }
}

pub fn sync(f: &SyncFigure) {
    let mb = f.table_bytes as f64 / 1e6;
    if !f.connections.is_empty() {
        println!("  sync connections: {}", f.connections);
    }
    for r in &f.rows {
        let bytes = r.bytes_per_rank_per_clock.map_or(String::new(), |b| {
            format!(
                ", {:.2}x the table per rank through sockets (a ring: {:.2}x)",
                b / f.table_bytes as f64,
                crate::sync::ring_bytes(r.workers, f.table_bytes) / f.table_bytes as f64
            )
        });
        println!(
            "  sync of {mb:.1} MB, {} ranks, {}: {:.1} ms per clock; engine / this {:.2}x{bytes}",
            r.workers, r.system, r.ms_per_clock, r.engine_over_this
        );
    }
    for line in &f.skipped {
        println!("  sync: {line}");
    }
}

/// The fits, the projection table and the ratio against the paper's point.
pub fn scaling(f: &ScalingFigure) {
    for x in &f.fits {
        println!(
            "  scaling fit, {}: a {:.2} ms per hop, c {:.3} ns per table byte (CPU), w {:.3} ns per byte sent (loopback); RMS residual {:.1} ms",
            x.system,
            x.latency_s * 1e3,
            x.cpu_s_per_byte * 1e9,
            x.wire_s_per_byte * 1e9,
            x.rms_residual_ms
        );
    }
    println!(
        "  scaling projection of a {:.1} MB table, {:.0} ms of compute per clock: speedup (ms per clock)",
        f.table_bytes as f64 / 1e6,
        f.compute_ms
    );
    let machines: Vec<usize> = crate::scaling::MACHINES.to_vec();
    let header: Vec<String> = machines.iter().map(|n| format!("{n:>14}")).collect();
    println!("    {:<44}{}", "system, link, overlap", header.join(""));
    let mut keys: Vec<(String, f64, bool)> = Vec::new();
    for r in &f.rows {
        if !keys.iter().any(|k| k.0 == r.system && k.1 == r.network_gbps && k.2 == r.overlap) {
            keys.push((r.system.clone(), r.network_gbps, r.overlap));
        }
    }
    for (system, gbps, overlap) in &keys {
        let cells: Vec<String> = machines
            .iter()
            .map(|&n| {
                f.rows
                    .iter()
                    .find(|r| {
                        &r.system == system && r.network_gbps == *gbps && r.overlap == *overlap && r.machines == n
                    })
                    .map_or(format!("{:>14}", "-"), |r| {
                        format!("{:>14}", format!("{:.2}x ({:.0})", r.speedup, r.ms_per_clock))
                    })
            })
            .collect();
        let label = format!("{system}, {gbps} Gb/s, {}", if *overlap { "overlap" } else { "no overlap" });
        println!("    {label:<44}{}", cells.join(""));
    }
    for r in f.rows.iter().filter(|r| r.machines == f.paper_machines && r.system == crate::sync::ENGINE) {
        println!(
            "  scaling at {} machines, {} Gb/s, {}: {:.2}x = {:.2} of the paper's {:.0}x",
            r.machines,
            r.network_gbps,
            if r.overlap { "overlap" } else { "no overlap" },
            r.speedup,
            r.speedup / f.paper_speedup,
            f.paper_speedup
        );
    }
}

/// Whether the run's host factor was measured in the run or given.
fn calibration_source(f: &StallFigure) -> &'static str {
    let measured = f.meta.calibration.paper_bytes_per_second / f.meta.calibration.raw_tcp_bytes_per_second;
    if (measured - f.meta.calibration.host_factor).abs() <= 1e-9 * measured {
        "measured"
    } else {
        "given (not this run's measured)"
    }
}

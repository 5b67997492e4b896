//! Paper Figure 12: AdamLike throughput (GeePS, a table per layer, BSP, on
//! `Settings::workers` processes (4 by default)) as the device budget shrinks from "everything fits"
//! to the smallest budget the planner accepts, relative to everything-fits
//! in the same repeat. It owns the sweep; it never chooses placement (the
//! planner does, from the budget alone).

use crate::error::Result;
use crate::probe;
use crate::profile;
use crate::results::{median, Calibration, MemoryFigure, MemoryPoint, Meta};
use crate::settings::Settings;
use crate::train_job::{self, RunMeans, TrainJob};
use crate::trainer::Mode;
use crate::workload::{Scale, Workload};

/// The budget fraction the target is read at, and the target.
pub const TARGET_FRACTION: f64 = 0.35;
pub const TARGET_RELATIVE: f64 = 0.9;
/// The paper: 73% of the throughput at 35% of the memory.
pub const PAPER_RELATIVE: f64 = 0.73;

pub fn run(s: &Settings, calibration: &Calibration) -> Result<MemoryFigure> {
    let model = profile::adamlike();
    let scale = Scale { bytes: s.adamlike_bytes, host: calibration.host_factor };
    let w = Workload::new(&model, scale);
    let (mode, slack) = (Mode::PerLayer, Some(0));
    let fits = probe::everything_fits(&w, mode, slack)?;
    let minimum = probe::minimum(&w, mode, slack)?;
    let mut budgets: Vec<usize> =
        s.memory_fractions.iter().map(|f| (f * fits as f64).round() as usize).filter(|&b| b > minimum).collect();
    budgets.push(minimum);
    // Diagnosis: keep everything-fits (the reference) and the budgets whose
    // "NN%" label matches the filter.
    if let Some(f) = &s.filter {
        let label = |b: usize| format!("{:.0}%", b as f64 / fits as f64 * 100.0);
        budgets.retain(|&b| b == fits || label(b).contains(f.as_str()));
    }
    let mut runs: Vec<Vec<(f64, RunMeans)>> = vec![Vec::new(); budgets.len()];
    let mut plans = vec![None; budgets.len()];
    for repeat in 0..s.repeats {
        let mut reference = None;
        for (i, &device_memory) in budgets.iter().enumerate() {
            let job = TrainJob {
                workload: w.clone(),
                mode,
                slack,
                device_memory,
                warmup: s.warmup,
                iterations: s.iterations,
            };
            let ranks = train_job::run(&job, s.workers, s.limit)?;
            plans[i] = Some(ranks[0].plan.clone());
            let means = RunMeans::of(&ranks);
            let throughput = 1.0 / means.wall_s;
            let base = *reference.get_or_insert(throughput);
            eprintln!(
                "memory: budget {:.1} MB ({:.0}% of everything-fits, repeat {}): {:.1} ms per iteration, {:.2}x",
                device_memory as f64 / 1e6,
                device_memory as f64 / fits as f64 * 100.0,
                repeat + 1,
                means.wall_s * 1e3,
                throughput / base
            );
            if std::env::var_os("GEEPS_BENCH_SITES").is_some() {
                eprintln!("    compute {:.1} ms; blocked ms: {}", means.compute_s * 1e3, means.blocked_summary());
            }
            means.print_sites(10);
            runs[i].push((throughput / base, means));
        }
    }
    let seconds_scale = scale.bytes * scale.host;
    let points = budgets
        .iter()
        .zip(runs)
        .zip(plans)
        .map(|((&budget, r), plan)| {
            let relative: Vec<f64> = r.iter().map(|(rel, _)| *rel).collect();
            let wall = median(&r.iter().map(|(_, m)| m.wall_s).collect::<Vec<_>>());
            MemoryPoint {
                budget_bytes: budget,
                fraction: budget as f64 / fits as f64,
                paper_equivalent_images_per_second: model.batch as f64 * seconds_scale / wall,
                relative: median(&relative),
                relative_samples: relative,
                stall_fraction: median(&r.iter().map(|(_, m)| m.stall_fraction).collect::<Vec<_>>()),
                plan: plan.expect("every budget ran"),
            }
        })
        .collect();
    Ok(MemoryFigure {
        meta: Meta::new(s, calibration),
        model: model.name,
        scale,
        iterations: s.iterations,
        everything_fits_bytes: fits,
        minimum_bytes: minimum,
        target_fraction: TARGET_FRACTION,
        target_relative: TARGET_RELATIVE,
        paper_relative: PAPER_RELATIVE,
        points,
    })
}

/// Relative throughput at the target fraction, interpolated between the
/// measured budgets around it.
pub fn at_target(f: &MemoryFigure) -> Option<f64> {
    let mut pts: Vec<(f64, f64)> = f.points.iter().map(|p| (p.fraction, p.relative)).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let x = f.target_fraction;
    pts.windows(2).find(|w| w[0].0 <= x && x <= w[1].0).map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x1 - x0 < 1e-12 {
            y0
        } else {
            y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        }
    })
}

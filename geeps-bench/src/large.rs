//! Paper Figure 13: a synthetic fully connected model of more and more
//! layers under a fixed device budget (the paper's 5 GB GPU, scaled), on
//! `Settings::workers` processes (4 by default), GeePS with a table per layer, BSP. Throughput is
//! connections trained per second relative to the largest model whose data
//! all fits on the device, in the same repeat. It owns the sweep; it never
//! chooses placement.

use crate::error::{BenchError, Result};
use crate::probe;
use crate::profile;
use crate::results::{median, Calibration, LargeFigure, LargePoint, Meta};
use crate::settings::Settings;
use crate::train_job::{self, RunMeans, TrainJob};
use crate::trainer::Mode;
use crate::workload::{Scale, Workload};

/// The paper's GPU memory (Tesla K20C).
pub const PAPER_DEVICE_BYTES: f64 = 5e9;
pub const TARGET_RELATIVE: f64 = 0.85;

pub fn run(s: &Settings, calibration: &Calibration) -> Result<LargeFigure> {
    let scale = Scale { bytes: s.large_bytes, host: calibration.host_factor };
    let device_memory = (PAPER_DEVICE_BYTES * scale.bytes).round() as usize;
    let (mode, slack) = (Mode::PerLayer, Some(0));
    let mut sizes = Vec::new();
    for &layers in &s.large_layers {
        let w = Workload::new(&profile::synthetic_fc(layers), scale);
        let plan = probe::plan(&w, mode, slack, device_memory)?
            .map_err(|e| BenchError::msg(format!("{layers}-layer synthetic model: {e}")))?;
        let fits = plan.param_host_bytes == 0 && plan.local_host_bytes == 0;
        sizes.push((layers, w, fits));
    }
    let reference = sizes
        .iter()
        .position(|(_, _, fits)| *fits)
        .map(|first| sizes.iter().rposition(|(_, _, f)| *f).unwrap_or(first))
        .ok_or_else(|| BenchError::msg("no synthetic model fits the device budget; add a smaller one"))?;
    let mut runs: Vec<Vec<(f64, RunMeans)>> = vec![Vec::new(); sizes.len()];
    let mut plans = vec![None; sizes.len()];
    for repeat in 0..s.repeats {
        let mut rates = vec![0.0; sizes.len()];
        let mut means = Vec::with_capacity(sizes.len());
        for (i, (layers, w, _)) in sizes.iter().enumerate() {
            let job =
                TrainJob { workload: w.clone(), mode, slack, device_memory, warmup: 1, iterations: s.large_iterations };
            let ranks = train_job::run(&job, s.workers, s.limit)?;
            plans[i] = Some(ranks[0].plan.clone());
            let m = RunMeans::of(&ranks);
            rates[i] = w.connections_per_iteration / m.wall_s;
            eprintln!(
                "large: {layers} layers ({:.1} MB of parameters, {:.1}x the budget; repeat {}): {:.0} ms per iteration, {:.1}% stall",
                w.param_bytes() as f64 / 1e6,
                w.param_bytes() as f64 / device_memory as f64,
                repeat + 1,
                m.wall_s * 1e3,
                m.stall_fraction * 100.0
            );
            means.push(m);
        }
        for (i, m) in means.into_iter().enumerate() {
            runs[i].push((rates[i] / rates[reference], m));
        }
    }
    let seconds_scale = scale.bytes * scale.host;
    let points = sizes
        .iter()
        .zip(runs)
        .zip(plans)
        .map(|(((layers, w, fits), r), plan)| {
            let relative: Vec<f64> = r.iter().map(|(rel, _)| *rel).collect();
            let wall = median(&r.iter().map(|(_, m)| m.wall_s).collect::<Vec<_>>());
            LargePoint {
                layers: *layers,
                param_bytes: w.param_bytes(),
                local_bytes: w.local_bytes(),
                params_over_budget: w.param_bytes() as f64 / device_memory as f64,
                fits: *fits,
                paper_equivalent_connections_per_second: w.connections_per_iteration * seconds_scale / wall,
                relative: median(&relative),
                relative_samples: relative,
                stall_fraction: median(&r.iter().map(|(_, m)| m.stall_fraction).collect::<Vec<_>>()),
                plan: plan.expect("every size ran"),
            }
        })
        .collect();
    Ok(LargeFigure {
        meta: Meta::new(s, calibration),
        scale,
        iterations: s.large_iterations,
        device_memory,
        layer_param_bytes: sizes[0].1.param_bytes() / sizes[0].0.max(1),
        batch: profile::synthetic_batch(),
        reference_layers: sizes[reference].0,
        target_relative: TARGET_RELATIVE,
        points,
    })
}

/// The smallest relative throughput among models whose parameters are at
/// least twice the device budget.
pub fn worst_large(f: &LargeFigure) -> Option<f64> {
    f.points.iter().filter(|p| p.params_over_budget >= 2.0).map(|p| p.relative).min_by(f64::total_cmp)
}

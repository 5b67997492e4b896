//! Paper Figure 14: compute and stall time per mini-batch of AdamLike and
//! GoogLeNet on `Settings::workers` processes (4 by default), for GeePS (a table per layer),
//! GeePS-single-table and CPU-PS, each at slack 0, 1 and unbounded. GeePS
//! configurations get the "everything fits" budget the planner reports;
//! CPU-PS gets room for one layer's read and update buffers (it records
//! nothing, so nothing is pinned). Repeats are interleaved across
//! configurations so drifting machine load hits them alike. It owns the
//! sweep; it never touches the engine beyond the trainer.

use crate::error::Result;
use crate::probe;
use crate::profile::{self, Model};
use crate::results::{median, Calibration, Meta, StallFigure, StallModel, StallRow, StallSweepPoint};
use crate::settings::Settings;
use crate::train_job::{self, RunMeans, TrainJob};
use crate::trainer::{slack_label, Mode};
use crate::workload::{Scale, Workload, ROW_WIDTH};

/// Stall fraction the suite aims at for GeePS under BSP.
pub const TARGET: f64 = 0.05;
/// The paper's GeePS stall fraction (§5.2).
pub const PAPER: f64 = 0.08;

pub const SLACKS: [Option<u32>; 3] = [Some(0), Some(1), None];

/// The repeat whose stall fraction is the median (the lower middle one).
fn median_run(runs: &[RunMeans]) -> &RunMeans {
    let mut order: Vec<&RunMeans> = runs.iter().collect();
    order.sort_by(|a, b| a.stall_fraction.total_cmp(&b.stall_fraction));
    order[(order.len() - 1) / 2]
}

fn budget(w: &Workload, mode: Mode) -> Result<usize> {
    match mode {
        Mode::CpuPs => Ok(2 * w.largest_param_bytes() + 2 * ROW_WIDTH * 4),
        _ => probe::everything_fits(w, mode, Some(0)),
    }
}

fn model(s: &Settings, m: &Model, scale: Scale) -> Result<StallModel> {
    let w = Workload::new(m, scale);
    let configs: Vec<(Mode, Option<u32>, usize)> = Mode::ALL
        .iter()
        .map(|&mode| budget(&w, mode).map(|b| SLACKS.map(|slack| (mode, slack, b))))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .filter(|(mode, slack, _)| {
            let label = format!("{} {} {}", m.name, mode.label(), slack_label(*slack));
            s.filter.as_ref().is_none_or(|f| label.contains(f.as_str()))
        })
        .collect();
    let mut samples: Vec<Vec<RunMeans>> = vec![Vec::new(); configs.len()];
    for repeat in 0..s.repeats {
        for (i, &(mode, slack, device_memory)) in configs.iter().enumerate() {
            let job = TrainJob {
                workload: w.clone(),
                mode,
                slack,
                device_memory,
                warmup: s.warmup,
                iterations: s.iterations,
            };
            let means = RunMeans::of(&train_job::run(&job, s.workers, s.limit)?);
            eprintln!(
                "stall: {} {} {} (repeat {}): {:.1} ms compute + {:.1} ms stall per iteration ({:.1}% stall; blocked ms: {})",
                m.name,
                mode.label(),
                slack_label(slack),
                repeat + 1,
                means.compute_s * 1e3,
                (means.wall_s - means.compute_s) * 1e3,
                means.stall_fraction * 100.0,
                means.blocked_summary()
            );
            means.print_sites(8);
            samples[i].push(means);
        }
    }
    let rows = configs
        .iter()
        .zip(&samples)
        .map(|(&(mode, slack, device_memory), runs)| {
            let pick = |f: &dyn Fn(&RunMeans) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            StallRow {
                config: mode.label().into(),
                slack,
                slack_label: slack_label(slack),
                device_memory,
                compute_ms: pick(&|r| r.compute_s * 1e3),
                stall_ms: pick(&|r| (r.wall_s - r.compute_s).max(0.0) * 1e3),
                stall_fraction: pick(&|r| r.stall_fraction),
                geeps_blocked_fraction: pick(&|r| r.geeps_blocked_fraction),
                slow_path_calls_per_iteration: pick(&|r| r.slow_path_calls),
                blocked_ms_by_call: runs[0]
                    .blocked_by_call
                    .iter()
                    .enumerate()
                    .map(|(k, (name, _))| {
                        (name.clone(), pick(&|r| r.blocked_by_call.get(k).map_or(0.0, |c| c.1) * 1e3))
                    })
                    .filter(|(_, ms)| *ms > 0.0)
                    .collect(),
                longest_waits_ms: median_run(runs)
                    .longest_waits
                    .iter()
                    .take(8)
                    .map(|(site, s)| (site.clone(), s * 1e3))
                    .collect(),
                stall_fraction_samples: runs.iter().map(|r| r.stall_fraction).collect(),
            }
        })
        .collect();
    Ok(StallModel {
        model: m.name.clone(),
        paper_param_bytes: m.param_bytes(),
        paper_local_bytes: m.local_bytes(),
        paper_seconds_per_batch: m.paper_seconds_per_batch(),
        scale,
        param_bytes: w.param_bytes(),
        local_bytes: w.local_bytes(),
        layers: w.layers.len(),
        nominal_compute_ms: w.compute().as_secs_f64() * 1e3,
        rows,
    })
}

/// GeePS under BSP at each of the sweep's host factors (none under a
/// `--filter`, which asks for particular configurations).
fn sweep(s: &Settings, calibrated: f64) -> Result<Vec<StallSweepPoint>> {
    let mut points = Vec::new();
    if s.filter.is_some() {
        return Ok(points);
    }
    for (m, bytes) in [(profile::adamlike(), s.adamlike_bytes), (profile::googlenet(), s.googlenet_bytes)] {
        for &of in &s.host_factor_sweep {
            let host = calibrated * of;
            let w = Workload::new(&m, Scale { bytes, host });
            let device_memory = budget(&w, Mode::PerLayer)?;
            let mut runs = Vec::with_capacity(s.repeats);
            for _ in 0..s.repeats {
                let job = TrainJob {
                    workload: w.clone(),
                    mode: Mode::PerLayer,
                    slack: Some(0),
                    device_memory,
                    warmup: s.warmup,
                    iterations: s.iterations,
                };
                runs.push(RunMeans::of(&train_job::run(&job, s.workers, s.limit)?));
            }
            let pick = |f: &dyn Fn(&RunMeans) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let p = StallSweepPoint {
                model: m.name.clone(),
                host_factor: host,
                of_calibrated: of,
                compute_ms: pick(&|r| r.compute_s * 1e3),
                stall_ms: pick(&|r| (r.wall_s - r.compute_s).max(0.0) * 1e3),
                stall_fraction: pick(&|r| r.stall_fraction),
                stall_fraction_samples: runs.iter().map(|r| r.stall_fraction).collect(),
            };
            eprintln!(
                "stall sweep: {} GeePS BSP at host factor {host:.2} ({of}x the calibrated): {:.1}% stall",
                p.model,
                p.stall_fraction * 100.0
            );
            points.push(p);
        }
    }
    Ok(points)
}

pub fn run(s: &Settings, calibration: &Calibration) -> Result<StallFigure> {
    let host = calibration.host_factor;
    let models = vec![
        model(s, &profile::adamlike(), Scale { bytes: s.adamlike_bytes, host })?,
        model(s, &profile::googlenet(), Scale { bytes: s.googlenet_bytes, host })?,
    ];
    Ok(StallFigure {
        meta: Meta::new(s, calibration),
        iterations: s.iterations,
        target_stall_fraction: TARGET,
        paper_stall_fraction: PAPER,
        models,
        sweep: sweep(s, host)?,
    })
}

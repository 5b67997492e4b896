//! Every knob of a run, full or `--quick`, in one place: scale factors,
//! iterations, repeats, sweeps and time limits. Quick mode exists to prove
//! the suite works end to end in well under two minutes; its timings are
//! not figures. It never measures anything.

use std::time::Duration;

use crate::profile;
use crate::raw_tcp::ExchangeJob;
use crate::sync_job::SyncJob;

/// Worker processes of every multi-process figure, unless told otherwise.
pub const WORKERS: usize = 4;

/// The sync figure's numbers of ranks unless told otherwise (`--sync-ranks`).
pub const SYNC_WORLDS: [usize; 2] = [2, 4];

#[derive(Debug, Clone)]
pub struct Settings {
    pub quick: bool,
    /// Worker processes of the stall, memory and large-model figures and of
    /// the calibration.
    pub workers: usize,
    /// Runs only the stall configurations whose "model config slack" label,
    /// or the memory budgets whose "NN%" label, contains this (diagnosis;
    /// the figure is then incomplete).
    pub filter: Option<String>,
    /// A host factor to use instead of the measured one (to compare runs on
    /// the same emulated machine).
    pub host_factor: Option<f64>,
    /// Repeats of every measurement; figures are medians.
    pub repeats: usize,
    /// Raw TCP exchange that measures this machine's network (host factor).
    pub calibration: ExchangeJob,
    /// Clock exchange of the transport figure.
    pub exchange: ExchangeJob,
    /// The sync scenario (GoogLeNet's full-size table unless told otherwise).
    pub sync: SyncJob,
    /// The sync scenario's numbers of ranks (2 and 4 unless told otherwise).
    pub sync_worlds: Vec<usize>,
    pub adamlike_bytes: f64,
    pub googlenet_bytes: f64,
    pub warmup: usize,
    pub iterations: usize,
    /// Host factors, as multiples of the calibrated one, at which GeePS
    /// under BSP also runs (the stall figure's sweep).
    pub host_factor_sweep: Vec<f64>,
    /// Memory budgets as fractions of "everything fits" (the planner's
    /// minimum is always added).
    pub memory_fractions: Vec<f64>,
    pub large_bytes: f64,
    /// Layer counts of the synthetic model.
    pub large_layers: Vec<usize>,
    pub large_iterations: usize,
    /// Wall-clock limit of one multi-process run.
    pub limit: Duration,
    /// Compute per clock of the scaling projection in ms (default: GoogLeNet's
    /// on the paper's GPU).
    pub scaling_compute_ms: Option<f64>,
}

impl Settings {
    pub fn new(quick: bool, workers: usize) -> Self {
        if quick {
            Settings {
                quick,
                workers,
                filter: None,
                host_factor: None,
                repeats: 1,
                calibration: ExchangeJob { bytes: 2 << 20, rounds: 10 },
                exchange: ExchangeJob { bytes: 2 << 20, rounds: 10 },
                sync: SyncJob { bytes: 4 << 20, clocks: 3 },
                sync_worlds: SYNC_WORLDS.to_vec(),
                adamlike_bytes: 1.0 / 256.0,
                googlenet_bytes: 1.0 / 32.0,
                warmup: 2,
                iterations: 6,
                host_factor_sweep: vec![2.0],
                memory_fractions: vec![1.0, 0.6, 0.35],
                large_bytes: 1.0 / 1024.0,
                large_layers: vec![1, 4, 32],
                large_iterations: 2,
                limit: Duration::from_secs(90),
                scaling_compute_ms: None,
            }
        } else {
            Settings {
                quick,
                workers,
                filter: None,
                host_factor: None,
                repeats: 3,
                calibration: ExchangeJob { bytes: 8 << 20, rounds: 30 },
                exchange: ExchangeJob { bytes: 8 << 20, rounds: 30 },
                sync: SyncJob { bytes: profile::googlenet().param_bytes() as usize, clocks: 8 },
                sync_worlds: SYNC_WORLDS.to_vec(),
                adamlike_bytes: 1.0 / 32.0,
                googlenet_bytes: 1.0 / 4.0,
                warmup: 3,
                iterations: 12,
                host_factor_sweep: vec![0.5, 2.0, 4.0],
                memory_fractions: vec![1.0, 0.8, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2],
                large_bytes: 1.0 / 256.0,
                large_layers: vec![1, 2, 4, 8, 16, 32, 56],
                large_iterations: 3,
                limit: Duration::from_secs(300),
                scaling_compute_ms: None,
            }
        }
    }
}

//! The JSON results: one file per figure in the results folder, each with
//! the run's metadata (machine, mode, calibration). It owns the schema,
//! writing and reading; it never measures. `check.rs` validates the files.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::settings::Settings;
use crate::train_job::PlanSummary;
use crate::workload::Scale;

/// What ran, where.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub quick: bool,
    pub machine: Machine,
    pub calibration: Calibration,
    pub workers: usize,
    pub repeats: usize,
    /// Seconds since the Unix epoch when the figure finished.
    pub finished_unix: u64,
    /// The machine's 1, 5 and 15-minute load averages when the figure
    /// finished: other work on a shared machine shows up in every figure.
    pub load_average: [f64; 3],
}

impl Meta {
    /// Metadata of a figure that has just finished.
    pub fn new(s: &Settings, calibration: &Calibration) -> Self {
        Meta {
            quick: s.quick,
            machine: Machine::detect(),
            calibration: calibration.clone(),
            workers: s.workers,
            repeats: s.repeats,
            finished_unix: now_unix(),
            load_average: load_average(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / (1024.0 * 1024.0))
            .unwrap_or(0.0);
        Machine {
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            cpu_model,
            memory_gib,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        }
    }
}

/// The network baseline that sets the host factor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    /// Raw TCP bytes/s (in + out) per rank, one sample per repeat (mean over ranks).
    pub raw_tcp_samples: Vec<f64>,
    /// The best sample.
    pub raw_tcp_bytes_per_second: f64,
    /// The paper's network per machine, in + out: 12 Gbit/s measured, each way.
    pub paper_bytes_per_second: f64,
    /// `paper_bytes_per_second / raw_tcp_bytes_per_second`, unless given
    /// with `--host-factor`.
    pub host_factor: f64,
}

/// One measured configuration of the stall figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallRow {
    pub config: String,
    pub slack: Option<u32>,
    pub slack_label: String,
    pub device_memory: usize,
    /// Medians over repeats of per-iteration means over ranks.
    pub compute_ms: f64,
    pub stall_ms: f64,
    /// `stall / (compute + stall)`: time the emulated GPU did not compute.
    pub stall_fraction: f64,
    /// Time blocked inside geeps calls over wall time (geeps `Stats`).
    pub geeps_blocked_fraction: f64,
    pub slow_path_calls_per_iteration: f64,
    /// Milliseconds per iteration blocked in each kind of geeps call.
    pub blocked_ms_by_call: Vec<(String, f64)>,
    /// Milliseconds per iteration at the trainer's longest-waiting call sites
    /// ("pass layer call"), from the repeat with the median stall.
    pub longest_waits_ms: Vec<(String, f64)>,
    pub stall_fraction_samples: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallModel {
    pub model: String,
    /// Full-scale figures of the model (the paper's).
    pub paper_param_bytes: u64,
    pub paper_local_bytes: u64,
    pub paper_seconds_per_batch: f64,
    pub scale: Scale,
    pub param_bytes: usize,
    pub local_bytes: usize,
    pub layers: usize,
    pub nominal_compute_ms: f64,
    pub rows: Vec<StallRow>,
}

/// GeePS under BSP at a host factor other than the run's calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallSweepPoint {
    pub model: String,
    pub host_factor: f64,
    /// The host factor over the run's calibrated one.
    pub of_calibrated: f64,
    pub compute_ms: f64,
    pub stall_ms: f64,
    pub stall_fraction: f64,
    pub stall_fraction_samples: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallFigure {
    pub meta: Meta,
    pub iterations: usize,
    pub target_stall_fraction: f64,
    pub paper_stall_fraction: f64,
    /// At the run's calibrated host factor (the headline).
    pub models: Vec<StallModel>,
    /// GeePS under BSP at other host factors: how the stall depends on the
    /// emulated compute the calibration sets.
    #[serde(default)]
    pub sweep: Vec<StallSweepPoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryPoint {
    pub budget_bytes: usize,
    /// Budget over the everything-fits budget.
    pub fraction: f64,
    /// Images per second per worker, as the paper's machine would train them
    /// (emulated seconds divided by the scale factors).
    pub paper_equivalent_images_per_second: f64,
    /// Throughput over the everything-fits throughput of the same repeat (median).
    pub relative: f64,
    pub relative_samples: Vec<f64>,
    pub stall_fraction: f64,
    pub plan: PlanSummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryFigure {
    pub meta: Meta,
    pub model: String,
    pub scale: Scale,
    pub iterations: usize,
    pub everything_fits_bytes: usize,
    pub minimum_bytes: usize,
    pub target_fraction: f64,
    pub target_relative: f64,
    pub paper_relative: f64,
    pub points: Vec<MemoryPoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LargePoint {
    pub layers: usize,
    pub param_bytes: usize,
    pub local_bytes: usize,
    /// Parameter bytes over the device budget.
    pub params_over_budget: f64,
    pub fits: bool,
    pub paper_equivalent_connections_per_second: f64,
    /// Over the largest model that fits, same repeat (median).
    pub relative: f64,
    pub relative_samples: Vec<f64>,
    pub stall_fraction: f64,
    pub plan: PlanSummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LargeFigure {
    pub meta: Meta,
    pub scale: Scale,
    pub iterations: usize,
    pub device_memory: usize,
    pub layer_param_bytes: usize,
    pub batch: u64,
    pub reference_layers: usize,
    pub target_relative: f64,
    pub points: Vec<LargePoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransportRow {
    pub transport: String,
    pub workers: usize,
    pub baseline: String,
    /// Bytes/s in + out per worker (medians).
    pub baseline_bytes_per_second: f64,
    pub engine_bytes_per_second: f64,
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransportFigure {
    pub meta: Meta,
    pub table_bytes: usize,
    pub clocks: usize,
    pub rows: Vec<TransportRow>,
}

/// One system at one rank count in the sync scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncRow {
    pub workers: usize,
    pub system: String,
    /// Median over repeats of each run's median clock (slowest rank per clock).
    pub ms_per_clock: f64,
    pub samples_ms: Vec<f64>,
    /// The engine's time per clock over this system's (1 for the engine).
    pub engine_over_this: f64,
    /// TCP bytes each rank received (= sent, over all ranks) per clock,
    /// counted by the kernel, where the system's runner counts them.
    pub bytes_per_rank_per_clock: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SyncFigure {
    pub meta: Meta,
    pub table_bytes: usize,
    pub clocks: usize,
    pub rows: Vec<SyncRow>,
    /// Baselines not run here, and why.
    pub skipped: Vec<String>,
    /// The connections' settings: congestion control and stripes of the
    /// engine and the bench's ring (gloo's and MPI's are the system's).
    #[serde(default)]
    pub connections: String,
}

/// One measured configuration of the scaling calibration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub system: String,
    pub workers: usize,
    pub table_bytes: usize,
    /// Median over repeats of each run's median clock (slowest rank per clock).
    pub ms_per_clock: f64,
    pub samples_ms: Vec<f64>,
    /// What the fitted model gives for this point (loopback wire cost,
    /// times the oversubscription).
    pub model_ms: f64,
    /// Ranks per core here, at least 1; the fit divides the time by it.
    pub oversubscription: f64,
}

/// A fitted `comm(N, S) = a·L(N) + c·S + w·X(N, S)` (see `scaling.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingFit {
    pub system: String,
    /// `a`: seconds per sequential hop.
    pub latency_s: f64,
    /// `c`: seconds per table byte of CPU work.
    pub cpu_s_per_byte: f64,
    /// `w`: seconds per byte sent (each way) over loopback TCP.
    pub wire_s_per_byte: f64,
    pub rms_residual_ms: f64,
}

/// One projected configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingRow {
    pub system: String,
    /// Link bandwidth each way, Gbit/s.
    pub network_gbps: f64,
    /// Communication overlapped with compute (`max`) or after it (`+`).
    pub overlap: bool,
    pub machines: usize,
    pub ms_per_clock: f64,
    /// Throughput over one machine with the same compute per clock.
    pub speedup: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingFigure {
    pub meta: Meta,
    pub clocks: usize,
    /// The table the projection is for (the calibration also ran a quarter of it).
    pub table_bytes: usize,
    pub compute_ms: f64,
    pub compute_source: String,
    pub points: Vec<ScalingPoint>,
    pub fits: Vec<ScalingFit>,
    pub rows: Vec<ScalingRow>,
    pub paper_machines: usize,
    pub paper_speedup: f64,
    pub paper_setting: String,
}

/// Where each figure's files go.
pub struct Paths {
    pub dir: PathBuf,
}

impl Paths {
    pub fn json(&self, figure: &str) -> PathBuf {
        self.dir.join(format!("{figure}.json"))
    }

    pub fn png(&self, figure: &str) -> PathBuf {
        self.dir.join(format!("{figure}.png"))
    }
}

pub fn write<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| BenchError::msg(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text + "\n")?;
    Ok(())
}

pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::msg(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| BenchError::msg(format!("{}: {e}", path.display())))
}

/// Median of `v` (the mean of the middle two for even lengths); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut v = text.split_whitespace().map(|x| x.parse::<f64>().unwrap_or(0.0));
    [v.next().unwrap_or(0.0), v.next().unwrap_or(0.0), v.next().unwrap_or(0.0)]
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}

//! A training run on N worker processes over geeps-net on loopback: the job
//! each rank receives, what each rank reports, and the rank's side (join the
//! cluster, train, measure). It never chooses configurations or summarises
//! across ranks and repeats.

use std::time::{Duration, Instant};

use geeps::{Config, Geeps, Plan};
use serde::{Deserialize, Serialize};

use crate::device::BenchDevice;
use crate::error::Result;
use crate::ranks::{self, RankEnv};
use crate::trainer::{self, Mode, Trainer};
use crate::workload::{Workload, ROW_WIDTH};

pub const ROLE: &str = "train";
/// Call sites reported per rank.
const LONGEST_WAITS: usize = 8;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainJob {
    pub workload: Workload,
    pub mode: Mode,
    /// `None`: unbounded (asynchronous).
    pub slack: Option<u32>,
    /// Device memory budget per worker, bytes.
    pub device_memory: usize,
    pub warmup: usize,
    pub iterations: usize,
}

/// The placement the planner chose, as reported by `Geeps::plan`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanSummary {
    pub budget: usize,
    pub peak_bytes: usize,
    pub pool_bytes: usize,
    pub double_buffered: bool,
    pub param_device_bytes: usize,
    pub param_host_bytes: usize,
    pub local_device_bytes: usize,
    pub local_host_bytes: usize,
}

impl From<&Plan> for PlanSummary {
    fn from(p: &Plan) -> Self {
        PlanSummary {
            budget: p.budget,
            peak_bytes: p.peak_bytes,
            pool_bytes: p.pool_bytes,
            double_buffered: p.double_buffered,
            param_device_bytes: p.param_device_bytes,
            param_host_bytes: p.param_host_bytes,
            local_device_bytes: p.local_device_bytes,
            local_host_bytes: p.local_host_bytes,
        }
    }
}

/// One rank's measurement over the timed iterations.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankRun {
    pub iterations: usize,
    /// Wall time of the timed iterations.
    pub wall_s: f64,
    /// Emulated compute inside them.
    pub compute_s: f64,
    /// Time blocked inside geeps calls (geeps `Stats`).
    pub geeps_blocked_s: f64,
    pub geeps_stall_fraction: f64,
    pub slow_path_calls: u64,
    pub prefetch_hits: u64,
    pub bytes_host_to_device: u64,
    pub bytes_device_to_host: u64,
    /// Seconds blocked per call kind (`read`, `pre_update`, ...).
    pub blocked_by_call: Vec<(String, f64)>,
    /// The call sites where the trainer waited longest ("pass layer call"),
    /// seconds over the timed iterations.
    pub longest_waits: Vec<(String, f64)>,
    pub plan: PlanSummary,
}

/// Runs `job` on `world` ranks.
pub fn run(job: &TrainJob, world: usize, limit: Duration) -> Result<Vec<RankRun>> {
    ranks::run(ROLE, world, job, limit)
}

/// The rank's side.
pub fn rank_main(env: &RankEnv) -> Result<RankRun> {
    let job: TrainJob = env.job()?;
    let mut cluster = env.join_cluster()?;
    let config = Config::default().with_row_width(ROW_WIDTH).with_device_memory(job.device_memory);
    let mut b = Geeps::builder(config);
    let tables = trainer::prepare(&mut b, &job.workload, job.mode);
    b.transport(cluster.transport());
    if let Some(gpu) = BenchDevice::from_env()?.open(job.device_memory, env.rank)? {
        b.device(gpu);
    }
    let ps = b.build()?;
    let result = train(&ps, &job, tables);
    ps.shutdown()?;
    cluster.shutdown()?;
    result
}

fn train(ps: &Geeps, job: &TrainJob, tables: trainer::PreparedTables) -> Result<RankRun> {
    let mut t = Trainer::start(ps, &job.workload, tables, trainer::slack_of(job.slack))?;
    for _ in 0..job.warmup {
        t.iteration()?;
    }
    t.take_waits();
    ps.reset_stats();
    let start = Instant::now();
    let mut busy = Duration::ZERO;
    for _ in 0..job.iterations {
        busy += t.iteration()?;
    }
    let wall = start.elapsed();
    let s = ps.stats();
    let waits = t.take_waits();
    Ok(RankRun {
        iterations: job.iterations,
        wall_s: wall.as_secs_f64(),
        compute_s: busy.as_secs_f64(),
        geeps_blocked_s: s.blocked.as_secs_f64(),
        geeps_stall_fraction: s.stall_fraction,
        slow_path_calls: s.slow_path_calls,
        prefetch_hits: s.prefetch_hits,
        bytes_host_to_device: s.bytes_host_to_device,
        bytes_device_to_host: s.bytes_device_to_host,
        blocked_by_call: s.calls.iter().map(|(k, c)| (k.name().to_string(), c.blocked.as_secs_f64())).collect(),
        longest_waits: waits.into_iter().take(LONGEST_WAITS).map(|(site, d)| (site, d.as_secs_f64())).collect(),
        plan: PlanSummary::from(&ps.plan()?),
    })
}

/// One multi-process run, per iteration, averaged over ranks.
#[derive(Debug, Clone)]
pub struct RunMeans {
    pub wall_s: f64,
    pub compute_s: f64,
    /// `(wall − compute) / wall`, averaged over ranks.
    pub stall_fraction: f64,
    pub geeps_blocked_fraction: f64,
    pub slow_path_calls: f64,
    /// Seconds blocked per call kind.
    pub blocked_by_call: Vec<(String, f64)>,
    /// Seconds per iteration at the call sites any rank reported, longest first.
    pub longest_waits: Vec<(String, f64)>,
}

impl RunMeans {
    /// Milliseconds blocked per call kind, for progress lines.
    pub fn blocked_summary(&self) -> String {
        self.blocked_by_call
            .iter()
            .filter(|(_, t)| *t > 5e-5)
            .map(|(n, t)| format!("{n} {:.1}", t * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// With `GEEPS_BENCH_SITES` set, prints the `n` longest-waiting call sites.
    pub fn print_sites(&self, n: usize) {
        if std::env::var_os("GEEPS_BENCH_SITES").is_some() {
            for (site, t) in self.longest_waits.iter().take(n) {
                eprintln!("    {site}: {:.2} ms", t * 1e3);
            }
        }
    }

    pub fn of(runs: &[RankRun]) -> Self {
        let n = runs.len().max(1) as f64;
        let per = |f: &dyn Fn(&RankRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        let iters = |r: &RankRun| r.iterations.max(1) as f64;
        RunMeans {
            wall_s: per(&|r| r.wall_s / iters(r)),
            compute_s: per(&|r| r.compute_s / iters(r)),
            stall_fraction: per(&|r| ((r.wall_s - r.compute_s) / r.wall_s).max(0.0)),
            geeps_blocked_fraction: per(&|r| r.geeps_stall_fraction),
            slow_path_calls: per(&|r| r.slow_path_calls as f64 / iters(r)),
            blocked_by_call: runs
                .first()
                .map(|r0| {
                    r0.blocked_by_call
                        .iter()
                        .enumerate()
                        .map(|(i, (name, _))| {
                            (name.clone(), per(&|r| r.blocked_by_call.get(i).map_or(0.0, |c| c.1) / iters(r)))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            longest_waits: site_means(runs),
        }
    }
}

/// Per call site, seconds per iteration averaged over ranks (0 where a rank
/// did not report the site), longest first.
fn site_means(runs: &[RankRun]) -> Vec<(String, f64)> {
    let mut sites: Vec<(String, f64)> = Vec::new();
    for r in runs {
        for (site, secs) in &r.longest_waits {
            let per = secs / r.iterations.max(1) as f64 / runs.len() as f64;
            match sites.iter_mut().find(|(s, _)| s == site) {
                Some((_, t)) => *t += per,
                None => sites.push((site.clone(), per)),
            }
        }
    }
    sites.sort_by(|a, b| b.1.total_cmp(&a.1));
    sites
}

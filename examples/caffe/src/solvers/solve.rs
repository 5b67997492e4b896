//! `caffe-geeps train`: the solver's schedule run by every worker of the
//! cluster: initial parameters, mini-batches through geeps, a test every
//! test_interval (each worker evaluates its share of the test batches and
//! the sums meet in a geeps table), snapshots, and rank 0's report. It owns
//! the schedule and the summary; it must never call geeps directly
//! (`ps::worker` does) or decide how ranks connect (`cli::cluster` does).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use geeps::Stats;

use crate::cli::cluster::Cluster;
use crate::cli::report::{write_csv, Point, Reporter};
use crate::data::DataCache;
use crate::error::{Error, Result};
use crate::net::params::ParamLayout;
use crate::net::plain::Plain;
use crate::net::Net;
use crate::proto::net::{NetParam, Phase};
use crate::proto::net_state::NetState;
use crate::proto::solver::SolverParam;
use crate::ps::control::{Action, Control};
use crate::ps::worker::PsWorker;
use crate::ps::PsOptions;
use crate::solvers::snapshots::{self, ExistingSnapshots, JobId, Resume};
use crate::solvers::{learning_rate, Rule, Step};

/// Seed of everything random when the solver gives no random_seed.
pub const DEFAULT_SEED: u64 = 1701;

/// How to run a solver.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub ps: PsOptions,
    /// Start from these weights instead of the fillers.
    pub weights: Option<PathBuf>,
    /// Print log lines and write the curve.
    pub verbose: bool,
    /// Show the progress bar (on a terminal).
    pub progress: bool,
    /// Where the curve goes: `<prefix>_curve.csv` and `.png` (default: the
    /// solver's snapshot_prefix).
    pub curve_prefix: Option<String>,
    /// Resume from this snapshot: a `.solverstate` (its `.geeps` checkpoint
    /// beside it) or a geeps checkpoint folder.
    pub resume: Option<PathBuf>,
    /// When restarted by a launcher (`GEEPS_RESTART_COUNT` above 0) and
    /// `resume` is not given, resume from the newest complete snapshot of
    /// `snapshot_prefix`, if any.
    pub resume_on_restart: bool,
    /// What SIGINT asks of the run (Caffe's `-sigint_effect`, default stop).
    pub sigint_effect: SignalEffect,
    /// What SIGHUP asks of the run (Caffe's `-sighup_effect`, default snapshot).
    pub sighup_effect: SignalEffect,
    /// What a fresh run does with snapshots already under its prefix
    /// (default: refuse to start, naming them).
    pub existing: ExistingSnapshots,
    /// Where the nets' data comes from: the arrays fed to MemoryData layers
    /// (`DataCache::feed_memory_data`); the default has none.
    pub data: DataCache,
}

impl Default for TrainOptions {
    /// A quiet run from the fillers on the host device, with Caffe's
    /// signal effects (SIGINT stops, SIGHUP snapshots).
    fn default() -> Self {
        TrainOptions {
            ps: PsOptions::default(),
            weights: None,
            verbose: false,
            progress: false,
            curve_prefix: None,
            resume: None,
            resume_on_restart: false,
            sigint_effect: SignalEffect::Stop,
            sighup_effect: SignalEffect::Snapshot,
            existing: ExistingSnapshots::Refuse,
            data: DataCache::default(),
        }
    }
}

/// What a signal asks of a training run, as Caffe's `-sigint_effect` and
/// `-sighup_effect` values `stop`, `snapshot` and `none` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignalEffect {
    /// End the run early (SIGINT's default).
    #[default]
    Stop,
    /// Write a snapshot and go on (SIGHUP's default).
    Snapshot,
    /// Ignore the signal.
    None,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct TrainReport {
    pub workers: usize,
    pub batch: usize,
    pub iterations: u64,
    /// The whole run: setup, training, tests, snapshots.
    pub wall: Duration,
    /// Per local worker: time in training iterations (tests and snapshots excluded).
    pub train_time: Vec<Duration>,
    /// Images per second of the whole cluster, and per local worker.
    pub images_per_sec: f64,
    pub images_per_sec_per_worker: Vec<f64>,
    /// geeps counters per local worker.
    pub stats: Vec<Stats>,
    /// geeps' memory plan per local worker (where each access is served).
    pub plans: Vec<geeps::Plan>,
    /// Rank 0's raw training loss at every iteration.
    pub losses: Vec<f32>,
    /// The last test's outputs (name, value).
    pub test: Vec<(String, f32)>,
    /// The iteration the last test ran at (a run stopped early may have
    /// tested last long before it stopped).
    pub test_iteration: Option<u64>,
    /// The parameters at the end, one vector per parameter layer.
    pub final_params: Vec<Vec<f32>>,
    pub points: Vec<Point>,
    pub snapshots: Vec<PathBuf>,
    pub curve_csv: Option<PathBuf>,
    pub curve_png: Option<PathBuf>,
}

/// What every worker thread of this process shares.
struct Shared<'a> {
    solver: &'a SolverParam,
    opts: &'a TrainOptions,
    train: &'a Net,
    tests: &'a [Net],
    layout: &'a ParamLayout,
    initial: Vec<Vec<f32>>,
    seed: u64,
    max_iter: u64,
    world: usize,
    /// The geeps checkpoint to resume from, and whose it is.
    resume: Option<Resume>,
    /// The job every snapshot this run writes is recorded under.
    job: JobId,
    /// The lowest rank of this process: the one that answers its signals.
    first_local: usize,
    reporter: Option<Mutex<Reporter>>,
    abort: AtomicBool,
}

/// One worker's outcome.
struct RankResult {
    stats: Stats,
    plan: geeps::Plan,
    train_time: Duration,
    losses: Vec<f32>,
    test: Vec<(String, f32)>,
    test_iteration: Option<u64>,
    final_params: Vec<Vec<f32>>,
    snapshots: Vec<PathBuf>,
    /// Iterations run to (below `max_iter` when the workers agreed to stop).
    iterations: u64,
}

/// The seed of iteration `iter` on worker `rank` (dropout masks).
pub fn iteration_seed(seed: u64, rank: usize, iter: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((rank as u64) << 48) ^ iter
}

/// Loads the solver's nets and builds its TRAIN net and its test nets (in
/// the solver's order).
pub fn build_nets(solver: &SolverParam, cache: &DataCache) -> Result<(Net, Vec<Net>)> {
    let param = NetParam::load(&solver.net)?;
    let train = Net::build_for(&param, &solver.train_state, cache)?;
    train.check_labels()?;
    let mut tests = Vec::new();
    for t in &solver.test_nets {
        let p = if t.net == solver.net { param.clone() } else { NetParam::load(&t.net)? };
        let net = Net::build_for(&p, &t.state, cache)?;
        net.check_labels()?;
        tests.push(net);
    }
    Ok((train, tests))
}

/// The most passes over the test set one test may make (`test_iter` x batch).
const MAX_TEST_PASSES: usize = 10;

/// Trains `solver` on `cluster`'s local ranks.
pub fn train(solver: &SolverParam, opts: &TrainOptions, cluster: &Cluster) -> Result<TrainReport> {
    let start = Instant::now();
    opts.ps.validate()?;
    let b = opts.ps.batches_per_clock as u64;
    if solver.max_iter % b != 0 {
        return Err(Error::config(format!(
            "max_iter {} must be a multiple of batches_per_clock {b} (every worker ends on a whole clock)",
            solver.max_iter
        )));
    }
    if solver.snapshot % b != 0 {
        return Err(Error::config(format!(
            "snapshot {} must be a multiple of batches_per_clock {b} (a snapshot is taken between clocks)",
            solver.snapshot
        )));
    }
    let cache = opts.data.clone();
    let (train_net, test_nets) = build_nets(solver, &cache)?;
    crate::net::memory::check_fits(&train_net, cluster.local_ranks().len(), None)?;
    for (t, tn) in test_nets.iter().zip(&solver.test_nets) {
        let images = t.layers.iter().find_map(|l| l.data.as_ref().map(|d| d.set.len())).unwrap_or(0);
        let needed = tn.iter as usize * t.batch;
        // Beyond a few passes over the test set a test reads nothing new and
        // can take hours at every test_interval: a typo, not a choice.
        if images > 0 && needed / images > MAX_TEST_PASSES {
            return Err(Error::Prototxt {
                file: solver.file.clone(),
                line: tn.iter_line,
                msg: format!(
                    "test_iter {} x batch {} = {needed} images is {} passes over the test set of {images} images at every test; \
                     one pass is test_iter: {} (at most {MAX_TEST_PASSES} passes are allowed)",
                    tn.iter,
                    t.batch,
                    needed / images,
                    images.div_ceil(t.batch.max(1))
                ),
            });
        }
        if needed > images {
            tracing::warn!(
                "test_iter {} x batch {} = {needed} images, but the test set has {images}: each test reads some images more than once (as Caffe would); lower test_iter to {}",
                tn.iter,
                t.batch,
                images / t.batch.max(1)
            );
        }
    }
    let layout = ParamLayout::of(&train_net);
    for t in &test_nets {
        layout.share_with(t)?;
    }
    // A budget that cannot hold one layer is said once, before any worker starts.
    let rule = Rule::of(solver);
    crate::ps::budget::for_worker(
        &train_net,
        &layout,
        &opts.ps,
        rule.history_slots() + usize::from(rule.accumulates() || layout.has_sharing()),
    )?;
    let job = JobId::current(&layout, solver);
    let restarted = opts.resume_on_restart
        && std::env::var("GEEPS_RESTART_COUNT").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) > 0;
    let resume = snapshots::choose(&solver.snapshot_prefix, &job, opts.resume.as_deref(), restarted, opts.existing)?;
    if resume.is_none()
        && opts.existing == ExistingSnapshots::Overwrite
        && !restarted
        && cluster.local_ranks().contains(&0)
    {
        let removed = snapshots::remove_all(&solver.snapshot_prefix)?;
        if removed > 0 {
            tracing::warn!("-overwrite: removed {removed} earlier snapshot(s) of `{}`", solver.snapshot_prefix);
        }
    }
    let seed = solver.random_seed.unwrap_or(DEFAULT_SEED);
    let fillers = layout.initial(&train_net, seed);
    let (initial, not_in_weights) = match &opts.weights {
        Some(w) => layout.fine_tune(w, Some(&fillers))?,
        None => (fillers, Vec::new()),
    };
    let world = cluster.world();
    let reporter = cluster
        .local_ranks()
        .contains(&0)
        .then(|| Mutex::new(Reporter::new(solver.max_iter, opts.verbose, opts.progress)));
    if let Some(r) = &reporter {
        if let Ok(r) = r.lock() {
            r.log(&format!(
                "net `{}`: {} parameters in {} layers; solver {}; {world} worker(s) x batch {} x iter_size {} = {} \
                 images per iteration; geeps slack {}, layers_per_table {}, batches_per_clock {}",
                train_net.name,
                layout.total(),
                layout.layers.len(),
                solver.solver_type.name(),
                train_net.batch,
                solver.iter_size,
                world as u64 * train_net.batch as u64 * solver.iter_size,
                opts.ps.slack,
                opts.ps.layers_per_table,
                opts.ps.batches_per_clock
            ));
            if let (Some(w), false) = (&opts.weights, not_in_weights.is_empty()) {
                r.log(&format!(
                    "{} has no weights for layer(s) {}: they start from their fillers",
                    w.display(),
                    not_in_weights.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    let shared = Shared {
        solver,
        opts,
        train: &train_net,
        tests: &test_nets,
        layout: &layout,
        initial,
        seed,
        max_iter: solver.max_iter,
        world,
        resume,
        job,
        reporter,
        abort: AtomicBool::new(false),
        first_local: cluster.local_ranks().iter().copied().min().unwrap_or(0),
    };
    let results: Vec<(usize, Result<RankResult>)> = std::thread::scope(|s| {
        let handles: Vec<_> = cluster
            .local_ranks()
            .iter()
            .map(|&rank| {
                let shared = &shared;
                let h = std::thread::Builder::new().name(format!("caffe-worker-{rank}")).spawn_scoped(s, move || {
                    let r = cluster.connect(rank).and_then(|t| run_rank(rank, t, shared, cluster));
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Relaxed);
                    }
                    r
                });
                (rank, h)
            })
            .collect();
        handles
            .into_iter()
            .map(|(rank, h)| {
                let r = match h {
                    Ok(h) => h.join().unwrap_or_else(|_| Err(Error::config("the worker thread panicked"))),
                    Err(e) => Err(Error::config(format!("cannot start a worker thread: {e}"))),
                };
                (rank, r)
            })
            .collect()
    });
    let reporter = shared.reporter.map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner()));
    if let Some(r) = &reporter {
        r.finish();
    }
    // Report the first real failure, not the workers that stopped because of it.
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for (rank, r) in results {
        match r {
            Ok(v) => ok.push((rank, v)),
            Err(e) => errors.push((rank, e)),
        }
    }
    let stopped = |e: &Error| matches!(e, Error::Config(m) if m.starts_with("stopped:"));
    if let Some(p) = errors.iter().position(|(_, e)| !stopped(e)).or(if errors.is_empty() { None } else { Some(0) }) {
        let (rank, e) = errors.swap_remove(p);
        return Err(Error::Worker { rank, source: Box::new(e) });
    }
    let batch = train_net.batch;
    let per_worker: Vec<f64> = ok
        .iter()
        .map(|(_, r)| {
            (batch as u64 * solver.iter_size * r.losses.len() as u64) as f64 / r.train_time.as_secs_f64().max(1e-9)
        })
        .collect();
    // Ranks run in step under BSP, so the cluster's rate is the mean
    // worker's rate times the world (all of it when all ranks are local).
    let mean = per_worker.iter().sum::<f64>() / per_worker.len().max(1) as f64;
    let rank0 = ok.iter().find(|(rank, _)| *rank == 0).map(|(_, r)| r);
    let points = reporter.map(|r| r.points).unwrap_or_default();
    let mut report = TrainReport {
        workers: world,
        batch,
        iterations: rank0.map_or(solver.max_iter, |r| r.iterations),
        wall: start.elapsed(),
        train_time: ok.iter().map(|(_, r)| r.train_time).collect(),
        images_per_sec: mean * world as f64,
        images_per_sec_per_worker: per_worker,
        stats: ok.iter().map(|(_, r)| r.stats.clone()).collect(),
        plans: ok.iter().map(|(_, r)| r.plan.clone()).collect(),
        losses: rank0.map(|r| r.losses.clone()).unwrap_or_default(),
        test: rank0.map(|r| r.test.clone()).unwrap_or_default(),
        test_iteration: rank0.and_then(|r| r.test_iteration),
        final_params: rank0.map(|r| r.final_params.clone()).unwrap_or_default(),
        points,
        snapshots: rank0.map(|r| r.snapshots.clone()).unwrap_or_default(),
        curve_csv: None,
        curve_png: None,
    };
    if opts.verbose && rank0.is_some() {
        let prefix = opts.curve_prefix.clone().unwrap_or_else(|| solver.snapshot_prefix.clone());
        let csv = PathBuf::from(format!("{prefix}_curve.csv"));
        let png = PathBuf::from(format!("{prefix}_curve.png"));
        write_csv(&report.points, &csv)?;
        let acc = test_nets.first().and_then(accuracy_output);
        let title =
            format!("{} on {world} geeps worker(s)", if train_net.name.is_empty() { "net" } else { &train_net.name });
        crate::cli::plot::write_png(&report.points, acc.as_deref(), &title, &png)?;
        report.curve_csv = Some(csv);
        report.curve_png = Some(png);
    }
    Ok(report)
}

/// The error of an output (a loss) that turned NaN or infinite.
fn diverged(net: &Net, output: usize, value: f32, iter: u64) -> Error {
    let blob = net.outputs[output];
    let layer = net.layers.iter().find(|l| l.tops.contains(&blob));
    let (name, kind) = layer.map_or(("?", "?"), |l| (l.name.as_str(), l.type_name));
    Error::Diverged(format!(
        "output `{}` of layer `{name}` ({kind}) is {value} at iteration {iter}",
        net.blobs[blob].name
    ))
}

/// The name of the first output an Accuracy layer produces.
pub fn accuracy_output(net: &Net) -> Option<String> {
    net.outputs.iter().find_map(|&b| {
        net.layers.iter().find(|l| l.type_name == "Accuracy" && l.tops.contains(&b)).map(|_| net.blobs[b].name.clone())
    })
}

fn with_reporter(shared: &Shared<'_>, f: impl FnOnce(&mut Reporter)) {
    if let Some(r) = &shared.reporter {
        if let Ok(mut r) = r.lock() {
            f(&mut r);
        }
    }
}

/// Output names with their loss weights, in `net.outputs` order.
fn named(net: &Net, values: &[f32]) -> Vec<(String, f32, f32)> {
    net.outputs
        .iter()
        .zip(values)
        .map(|(&b, &v)| {
            let weight = net.layers.iter().find(|l| l.tops.contains(&b)).map_or(0.0, |l| l.loss_weight);
            (net.blobs[b].name.clone(), v, weight)
        })
        .collect()
}

fn run_rank(
    rank: usize,
    transport: Arc<dyn geeps::Transport>,
    sh: &Shared<'_>,
    cluster: &Cluster,
) -> Result<RankResult> {
    let rule = Rule::of(sh.solver);
    let test_outputs = sh.tests.iter().map(|t| t.outputs.len()).chain([sh.train.outputs.len()]).max().unwrap_or(0);
    let mut worker = PsWorker::new(sh.train, sh.layout, &sh.opts.ps, rule, test_outputs, transport)?;
    let trained = train_rank(rank, &mut worker, sh);
    if let Err(e) = &trained {
        // Before this worker leaves the cluster (dropping it does): a
        // worker that left is not waited for, and the others must stop
        // because of this failure, not train on without it.
        cluster.fail(&e.to_string());
    }
    trained
}

fn train_rank(rank: usize, worker: &mut PsWorker<'_>, sh: &Shared<'_>) -> Result<RankResult> {
    let s = sh.solver;
    let plan = worker.geeps().plan()?;
    if rank == 0 {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        with_reporter(sh, |r| {
            r.log(&format!(
                "geeps plan (rank 0): pool {:.1} MiB ({}), local accesses {} in place / {} buffered, \
                 local data {:.1} MiB on device / {:.1} MiB on host, \
                 parameters {:.1} MiB on device / {:.1} MiB on host, budget {:.0} MiB",
                mib(plan.pool_bytes),
                if plan.double_buffered { "double-buffered" } else { "single-buffered" },
                plan.local_in_place,
                plan.local_buffered,
                mib(plan.local_device_bytes),
                mib(plan.local_host_bytes),
                mib(plan.param_device_bytes),
                mib(plan.param_host_bytes),
                mib(plan.budget)
            ))
        });
    }
    let start_iter = match &sh.resume {
        Some(Resume { folder, whose }) => {
            if rank == 0 {
                // Snapshots a killed run left half-written would mix its
                // workers' states with this run's; the others wait in
                // `restore` until this rank has restored.
                snapshots::remove_incomplete(&s.snapshot_prefix);
            }
            let iter = worker.restore(folder)?;
            with_reporter(sh, |r| r.log(&format!("Resuming from {} at iteration {iter} ({whose})", folder.display())));
            if rank == 0 {
                complete_resumed_snapshot(worker, sh, iter)?;
            }
            iter
        }
        None => {
            worker.initialize((rank == 0).then_some(sh.initial.as_slice()))?;
            0
        }
    };
    let mut paused = Duration::ZERO;
    let loop_start = Instant::now();
    let mut losses = Vec::with_capacity(s.max_iter as usize);
    let mut window: Vec<f32> = Vec::new();
    let mut test = Vec::new();
    let mut test_iteration = None;
    let mut test_prev: Vec<f32> = Vec::new();
    if !sh.tests.is_empty() && start_iter > 0 && rank == 0 {
        // The restored test sums are the baseline of the next test's means.
        test_prev = worker.test_totals()?;
    }
    let mut snapshots = Vec::new();
    let test_due = |iter: u64| {
        !sh.tests.is_empty()
            && s.test_interval > 0
            && iter % s.test_interval == 0
            && (iter > 0 || s.test_initialization)
    };
    let loss_index =
        sh.train.outputs.iter().position(|&b| sh.train.layers.iter().any(|l| l.is_loss() && l.tops.contains(&b)));
    let mut control = Control::default();
    let (mut checkpoints_seen, mut drain_seen) = (0u64, false);
    let mut stopped_at = None;
    let per_clock = sh.opts.ps.batches_per_clock as u64;
    for iter in start_iter..sh.max_iter {
        if sh.abort.load(Ordering::Relaxed) {
            return Err(Error::config("stopped: another worker failed"));
        }
        // The resumed iteration's test and snapshot were done before the
        // snapshot resumed from was taken.
        let resumed_here = iter == start_iter && sh.resume.is_some();
        let mut agreed = None;
        if iter % per_clock == 0 {
            take_requests(rank, worker, sh, &mut control, &mut checkpoints_seen, &mut drain_seen);
            let slack = u64::from(sh.opts.ps.slack);
            let read = worker.exchange_control(|read| control.delta(read, rank, iter, slack, per_clock))?;
            agreed = control.due(&read, sh.world, iter).filter(|_| !resumed_here);
        }
        if test_due(iter) && !resumed_here {
            let t0 = Instant::now();
            test = run_test(rank, worker, sh, iter, &mut test_prev)?;
            test_iteration = Some(iter);
            paused += t0.elapsed();
        }
        let scheduled = s.snapshot > 0 && iter > 0 && iter % s.snapshot == 0 && !resumed_here;
        if scheduled || agreed.is_some() {
            let t0 = Instant::now();
            if let Some(path) = snapshot(worker, sh, iter)? {
                snapshots.push(path);
            }
            paused += t0.elapsed();
        }
        if agreed == Some(Action::Stop) {
            with_reporter(sh, |r| {
                r.log(&format!("Optimization stopped early at iteration {iter} (the snapshot above resumes it)"))
            });
            stopped_at = Some(iter);
            break;
        }
        let rate = learning_rate(s, iter);
        let step = Step { rate, iter, scale: 1.0 / sh.world as f32, clip: 1.0 };
        let pass = (iter % sh.opts.ps.batches_per_clock as u64) as usize;
        // One seed per mini-batch; with iter_size 1, the iteration's own.
        let seeds: Vec<u64> = (0..s.iter_size).map(|k| iteration_seed(sh.seed, rank, iter * s.iter_size + k)).collect();
        let outputs = worker.iteration(pass, step, &seeds).map_err(|e| match e {
            Error::Diverged(what) => Error::Diverged(format!("{what} at iteration {iter}")),
            other => other,
        })?;
        let loss = loss_index.map_or(0.0, |k| outputs[k]);
        if let Some(k) = outputs.iter().position(|v| !v.is_finite()) {
            return Err(diverged(sh.train, k, outputs[k], iter));
        }
        losses.push(loss);
        if rank == 0 {
            window.push(loss);
            if window.len() > s.average_loss as usize {
                window.remove(0);
            }
            let smoothed = window.iter().sum::<f32>() / window.len() as f32;
            with_reporter(sh, |r| {
                if s.display > 0 && iter % s.display == 0 {
                    r.train(iter, smoothed, rate, &named(sh.train, &outputs));
                }
                r.tick();
            });
        }
    }
    let train_time = loop_start.elapsed().saturating_sub(paused);
    // Stopped early, every worker stopped at the same iteration, snapshot written.
    if !sh.tests.is_empty() && stopped_at.is_none() {
        test = run_test(rank, worker, sh, sh.max_iter, &mut test_prev)?;
        test_iteration = Some(sh.max_iter);
    }
    let final_params = if rank == 0 { worker.current_params()? } else { Vec::new() };
    if rank == 0 && s.snapshot_after_train && stopped_at.is_none() {
        snapshots.push(write_snapshot(sh, sh.max_iter, &final_params)?);
    }
    let stats = worker.stats();
    worker.shutdown()?;
    let iterations = stopped_at.unwrap_or(sh.max_iter);
    Ok(RankResult { stats, plan, train_time, losses, test, test_iteration, final_params, snapshots, iterations })
}

/// Turns what this worker was asked since the last clock into requests:
/// its process's signals (the lowest local rank answers them), and on rank
/// 0 an operator's checkpoint and drain (the admin endpoint).
fn take_requests(
    rank: usize,
    worker: &PsWorker<'_>,
    sh: &Shared<'_>,
    control: &mut Control,
    checkpoints_seen: &mut u64,
    drain_seen: &mut bool,
) {
    let mut ask = |what: &str, effect: SignalEffect| {
        let action = match effect {
            SignalEffect::Stop => Action::Stop,
            SignalEffect::Snapshot => Action::Snapshot,
            SignalEffect::None => return,
        };
        with_reporter(sh, |r| r.log(&format!("{what}: the workers agree on an iteration to {action:?}")));
        control.ask(action);
    };
    if rank == sh.first_local {
        if crate::cli::signals::take_interrupt() {
            ask("SIGINT/SIGTERM", sh.opts.sigint_effect);
        }
        if crate::cli::signals::take_hangup() {
            ask("SIGHUP", sh.opts.sighup_effect);
        }
    }
    if rank == 0 {
        let asked = worker.geeps().checkpoint_requests();
        if asked > *checkpoints_seen {
            *checkpoints_seen = asked;
            ask("a checkpoint asked for on the admin endpoint", SignalEffect::Snapshot);
        }
        if !*drain_seen && worker.geeps().drain_requested() {
            *drain_seen = true;
            ask("a drain asked for on the admin endpoint", SignalEffect::Stop);
        }
    }
}

/// Every worker saves its part of geeps' checkpoint (`PREFIX_iter_N.geeps`);
/// rank 0 then writes the weights and the solver state beside it.
fn snapshot(worker: &PsWorker<'_>, sh: &Shared<'_>, iter: u64) -> Result<Option<PathBuf>> {
    let dir = snapshots::checkpoint_folder(&sh.solver.snapshot_prefix, iter);
    if worker.geeps().rank() == 0 {
        // Named before it is published: a complete snapshot always says whose it is.
        sh.job.record(&dir)?;
    }
    if worker.checkpoint(&dir, iter)?.is_none() {
        return Ok(None);
    }
    let params = worker.current_params()?;
    let model = write_snapshot(sh, iter, &params)?;
    let state = snapshot_path(sh, iter, "solverstate");
    worker.write_solverstate(&state, iter, &model)?;
    let kind = if sh.solver.snapshot_hdf5 { "HDF5" } else { "binary proto" };
    with_reporter(sh, |r| r.log(&format!("Snapshotting solver state to {kind} file {}", state.display())));
    Ok(Some(model))
}

/// `PREFIX_iter_N.KIND`, with `.h5` after it for `snapshot_format: HDF5`.
fn snapshot_path(sh: &Shared<'_>, iter: u64, kind: &str) -> PathBuf {
    let h5 = if sh.solver.snapshot_hdf5 { ".h5" } else { "" };
    PathBuf::from(format!("{}_iter_{iter}.{kind}{h5}", sh.solver.snapshot_prefix))
}

/// After a resume at `iter` on rank 0: the weights and solver state of the
/// snapshot resumed from, where a kill came between its checkpoint and
/// them, and no temporary file of that write left behind.
fn complete_resumed_snapshot(worker: &PsWorker<'_>, sh: &Shared<'_>, iter: u64) -> Result<()> {
    crate::proto::binary::remove_stale_temporaries(Path::new(&sh.solver.snapshot_prefix));
    let model = snapshot_path(sh, iter, "caffemodel");
    let state = snapshot_path(sh, iter, "solverstate");
    if !model.is_file() {
        write_snapshot(sh, iter, &worker.current_params()?)?;
    }
    if !state.is_file() {
        worker.write_solverstate(&state, iter, &model)?;
    }
    Ok(())
}

fn write_snapshot(sh: &Shared<'_>, iter: u64, params: &[Vec<f32>]) -> Result<PathBuf> {
    let path = snapshot_path(sh, iter, "caffemodel");
    sh.layout.write_caffemodel(&sh.train.name, params, &path)?;
    let kind = if sh.solver.snapshot_hdf5 { "HDF5" } else { "binary proto" };
    with_reporter(sh, |r| r.log(&format!("Snapshotting to {kind} file {}", path.display())));
    Ok(path)
}

/// Tests every test net in turn (Caffe's TestAll); the outputs of test net
/// `k > 0` are named `net<k>/<output>`.
fn run_test(
    rank: usize,
    worker: &PsWorker<'_>,
    sh: &Shared<'_>,
    iter: u64,
    prev: &mut Vec<f32>,
) -> Result<Vec<(String, f32)>> {
    let params = worker.current_params()?;
    let mut out = Vec::new();
    for k in 0..sh.tests.len() {
        let named = test_one(rank, worker, sh, k, &params, iter, prev)?;
        out.extend(named.into_iter().map(|(n, v)| if k == 0 { (n, v) } else { (format!("net{k}/{n}"), v) }));
    }
    Ok(out)
}

/// Every worker evaluates its share of test net `k`'s batches on the
/// current parameters; the sums meet in geeps, and rank 0 reports the means.
fn test_one(
    rank: usize,
    worker: &PsWorker<'_>,
    sh: &Shared<'_>,
    k: usize,
    params: &[Vec<f32>],
    iter: u64,
    prev: &mut Vec<f32>,
) -> Result<Vec<(String, f32)>> {
    let net = &sh.tests[k];
    let map = sh.layout.share_with(net)?;
    let views: Vec<&[f32]> = map.iter().map(|m| m.map_or(&[][..], |i| params[i].as_slice())).collect();
    let batches_all = sh.solver.test_nets[k].iter;
    let (q, r) = (batches_all / sh.world as u64, batches_all % sh.world as u64);
    let mine = q + u64::from((rank as u64) < r);
    let mut sums = vec![0.0f32; net.outputs.len()];
    let mut plain = Plain::new(net, rank, sh.world)?;
    for i in 0..mine {
        for (s, v) in sums.iter_mut().zip(plain.forward(&views, false, iter ^ i)?) {
            *s += v;
        }
    }
    worker.add_test_outputs(&sums, mine as f32)?;
    if rank != 0 {
        return Ok(Vec::new());
    }
    let totals = worker.test_totals()?;
    if prev.len() != totals.len() {
        *prev = vec![0.0; totals.len()];
    }
    let slots = totals.len() - 1;
    let batches = totals[slots] - prev[slots];
    let means: Vec<f32> = (0..net.outputs.len()).map(|k| (totals[k] - prev[k]) / batches.max(1.0)).collect();
    *prev = totals;
    let named = named(net, &means);
    // Caffe's `Test loss`: the loss outputs' means times their weights.
    let loss = sh.solver.test_compute_loss.then(|| named.iter().map(|(_, v, w)| v * w).sum::<f32>());
    with_reporter(sh, |r| r.test(iter, &named, loss));
    Ok(named.into_iter().map(|(n, v, _)| (n, v)).collect())
}

/// `caffe-geeps test`: evaluates `weights` on the TEST phase of `model`.
/// The TEST net is built for `state` (its level and stages; the phase is TEST).
pub fn test_weights(
    model: &Path,
    weights: &Path,
    iterations: Option<u64>,
    state: &NetState,
) -> Result<(Vec<(String, f32)>, u64)> {
    let cache = DataCache::default();
    let param = NetParam::load(model)?;
    let train = Net::build(&param, Phase::Train, &cache)?;
    let test = Net::build_for(&param, &NetState { phase: Phase::Test, ..state.clone() }, &cache)?;
    test.check_labels()?;
    let layout = ParamLayout::of(&train);
    let map = layout.share_with(&test)?;
    let values = layout.from_caffemodel(weights)?;
    let views: Vec<&[f32]> = map.iter().map(|m| m.map_or(&[][..], |i| values[i].as_slice())).collect();
    let images = test.layers.iter().find_map(|l| l.data.as_ref().map(|d| d.set.len())).unwrap_or(0);
    let iterations = iterations.unwrap_or_else(|| (images as u64).div_ceil(test.batch as u64).max(1));
    Ok((crate::net::plain::evaluate(&test, &views, iterations)?, iterations))
}

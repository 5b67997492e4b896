//! `caffe-geeps`, the command line, spelled as Caffe's `caffe` tool and its
//! data tools are: `train -solver S` runs a Caffe solver on a cluster of
//! geeps workers, `test -model M -weights W` evaluates a snapshot, `time`
//! times the layers, `device_query -gpu N` describes a GPU, and
//! `convert_mnist_data`, `convert_imageset` and `compute_image_mean` make
//! LMDBs and mean files. gflags' single-dash and underscore flags are
//! rewritten first (`cli::args`). It owns argument parsing and what each
//! command prints; it must never train, evaluate or convert by itself (the
//! library does).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand};

use caffe_geeps::cli::args::{self, parse_phase, parse_signal_effect, GpuArg};
use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::cli::device_log;
use caffe_geeps::data::lmdb::LmdbReader;
use caffe_geeps::gpu::Gpu;
use caffe_geeps::proto::net::Phase;
use caffe_geeps::proto::net_state::NetState;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::{DeviceChoice, PsOptions};
use caffe_geeps::solvers::snapshots::ExistingSnapshots;
use caffe_geeps::solvers::solve::{self, SignalEffect, TrainOptions, TrainReport, DEFAULT_SEED};
use caffe_geeps::tools::convert::{self, ImagesetOptions};
use caffe_geeps::tools::mean;
use geeps::net::WireEncoding;
use geeps::CudaDevice;

#[derive(Parser, Debug)]
#[command(
    name = "caffe-geeps",
    about = "A Caffe-style trainer whose parameters and activations live in geeps",
    after_help = "Flags may be written as Caffe writes them: -solver x, -max_iter=5, --sigint_effect stop."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Caffe's `-level` and `-stage`: the net state layers' include and
/// exclude rules are checked against.
#[derive(Args, Debug, Clone)]
struct StateArgs {
    /// The net's level (Caffe's `-level`).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    level: i32,
    /// The net's stages, separated by commas (Caffe's `-stage`).
    #[arg(long, value_delimiter = ',')]
    stage: Vec<String>,
}

impl StateArgs {
    fn state(&self, phase: Phase) -> NetState {
        NetState { phase, level: self.level, stages: self.stage.clone() }
    }

    /// As Caffe's `train`: the level replaces the solver's, the stages add to them.
    fn apply(&self, s: &mut SolverParam) {
        let states = std::iter::once(&mut s.train_state).chain(s.test_nets.iter_mut().map(|t| &mut t.state));
        for st in states {
            if self.level != 0 {
                st.level = self.level;
            }
            st.stages.extend(self.stage.iter().cloned());
        }
    }
}

/// `train`'s flags.
#[derive(Args, Debug)]
struct TrainArgs {
    /// The solver prototxt (it names the net prototxt).
    #[arg(long)]
    solver: PathBuf,
    /// Data-parallel workers, threads of this process (default 4; with
    /// --gpu over several GPUs and no --workers: one process per GPU,
    /// started through geeps-launch).
    #[arg(long)]
    workers: Option<usize>,
    /// Run as one rank of a multi-process cluster: rank, world size and
    /// addresses come from the environment (geeps-launch, srun, mpirun,
    /// torchrun, GEEPS_*; implied when GEEPS_RANK is set). --workers is
    /// then ignored.
    #[arg(long)]
    net: bool,
    /// How update deltas cross the network in a multi-process run (--net,
    /// geeps-launch): f32 (exact) or bf16 (half the bytes, with error
    /// feedback so no update is lost). Overrides GEEPS_WIRE (default f32).
    /// Threads of one process (--workers) exchange no bytes: bf16 is
    /// refused there.
    #[arg(long)]
    wire: Option<WireEncoding>,
    /// Staleness bound in clocks: 0 is BSP.
    #[arg(long, default_value_t = 0)]
    slack: u32,
    /// geeps device memory budget per worker, in MiB (default: on the CPU,
    /// fitted to the net and bounded by the memory available; on a GPU, 512).
    #[arg(long)]
    device_memory_mb: Option<usize>,
    /// Consecutive parameter layers sharing one geeps table.
    #[arg(long, default_value_t = 1)]
    layers_per_table: usize,
    /// Mini-batches per clock.
    #[arg(long, default_value_t = 1)]
    batches_per_clock: usize,
    /// Start from these weights (a .caffemodel) instead of the fillers.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Resume from a snapshot: a .solverstate (its .geeps checkpoint
    /// beside it) or a geeps checkpoint folder. A rank restarted by
    /// `geeps-launch --max-restarts` resumes from the newest complete
    /// snapshot of snapshot_prefix without it.
    #[arg(long, conflicts_with = "weights")]
    snapshot: Option<PathBuf>,
    /// When snapshot_prefix already holds snapshots of an earlier run: go
    /// on from the newest (a run refuses to start over them otherwise).
    #[arg(long, conflicts_with_all = ["weights", "snapshot", "overwrite"])]
    resume: bool,
    /// When snapshot_prefix already holds snapshots of an earlier run:
    /// remove them and start from iteration 0.
    #[arg(long, conflicts_with = "snapshot")]
    overwrite: bool,
    /// Override the solver's max_iter.
    #[arg(long)]
    max_iter: Option<u64>,
    /// Where to write the curve (`PREFIX_curve.csv` and `.png`); default: snapshot_prefix.
    #[arg(long)]
    curve: Option<String>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Seconds a worker may wait for a slower one before failing.
    #[arg(long, default_value_t = 600)]
    wait_deadline_s: u64,
    /// Keep parameters, activations and the buffer pool on these CUDA
    /// GPUs (`0`, `0,1`: worker r takes the r-th, round robin; `all`:
    /// every visible GPU), as `solver_mode: GPU` does; the layers compute
    /// on that GPU (convolution and inner product through cuBLAS, the
    /// others as PTX kernels; layers without GPU code stay on the CPU).
    #[arg(long, value_parser = GpuArg::parse)]
    gpu: Option<GpuArg>,
    /// With --gpu or solver_mode: GPU, keep the rows on the GPU but compute
    /// every layer on the CPU (staged through copies): for comparing with
    /// the GPU layers.
    #[arg(long)]
    cpu_layers: bool,
    /// What SIGINT asks of the run: stop, snapshot or none.
    #[arg(long, default_value = "stop", value_parser = parse_signal_effect)]
    sigint_effect: SignalEffect,
    /// What SIGHUP asks of the run: snapshot, stop or none.
    #[arg(long, default_value = "snapshot", value_parser = parse_signal_effect)]
    sighup_effect: SignalEffect,
    #[command(flatten)]
    state: StateArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train with a Caffe solver prototxt.
    Train(TrainArgs),
    /// Time each layer's forward and backward (Caffe's `time`; no geeps).
    Time {
        /// The net prototxt (a train_test file or a deploy file).
        #[arg(long)]
        model: PathBuf,
        /// Iterations to average over (Caffe's default, 50).
        #[arg(long, default_value_t = 50)]
        iterations: u32,
        /// Compute on this GPU (the first of a list); without it, on the CPU.
        #[arg(long, value_parser = GpuArg::parse)]
        gpu: Option<GpuArg>,
        /// The phase to time: TRAIN (forward and backward; Caffe's `-phase`).
        #[arg(long, default_value = "TRAIN", value_parser = parse_phase)]
        phase: Phase,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Score weights on the TEST phase of a net (Caffe's `test`).
    Test {
        /// The net prototxt (a train_test file or a deploy file).
        #[arg(long)]
        model: PathBuf,
        /// The .caffemodel to score.
        #[arg(long)]
        weights: PathBuf,
        /// Test batches (default: enough to cover a Data layer's set once, else 50).
        #[arg(long)]
        iterations: Option<u64>,
        /// Compute on this GPU (the first of a list); without it, on the CPU.
        #[arg(long, value_parser = GpuArg::parse)]
        gpu: Option<GpuArg>,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Describe CUDA GPUs: name, compute capability, memory, driver.
    #[command(name = "device-query", alias = "device_query")]
    DeviceQuery {
        /// The GPUs to describe: `0`, `0,1` or `all`.
        #[arg(long, value_parser = GpuArg::parse)]
        gpu: GpuArg,
    },
    /// Convert MNIST-format IDX images and labels (raw or gzipped) to an LMDB.
    #[command(name = "convert-mnist", aliases = ["convert_mnist_data", "convert-mnist-data"])]
    ConvertMnist {
        /// The IDX images file (`*-images-idx3-ubyte[.gz]`).
        images: PathBuf,
        /// The IDX labels file (`*-labels-idx1-ubyte[.gz]`).
        labels: PathBuf,
        /// The LMDB folder to create.
        out: PathBuf,
        /// The database kind; only lmdb is written.
        #[arg(long, default_value = "lmdb", value_parser = ["lmdb"])]
        backend: String,
    },
    /// Convert a list of images (`path label` lines, paths under ROOT) to an LMDB.
    #[command(name = "convert-imageset", alias = "convert_imageset")]
    ConvertImageset {
        /// The folder the list's paths are under.
        root: PathBuf,
        /// The list file: one `relative/path label` a line.
        listfile: PathBuf,
        /// The LMDB folder to create.
        out: PathBuf,
        /// Resize to this height (with --resize-width; 0 keeps the size).
        #[arg(long, default_value_t = 0)]
        resize_height: u32,
        /// Resize to this width (with --resize-height; 0 keeps the size).
        #[arg(long, default_value_t = 0)]
        resize_width: u32,
        /// Shuffle the list before writing (`--shuffle` or `--shuffle=true`).
        #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
              default_value = "false", default_missing_value = "true", value_parser = BoolishValueParser::new())]
        shuffle: bool,
        /// The shuffle's seed.
        #[arg(long, default_value_t = DEFAULT_SEED)]
        seed: u64,
        /// One grey channel instead of BGR (`--gray` or `--gray=true`).
        #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
              default_value = "false", default_missing_value = "true", value_parser = BoolishValueParser::new())]
        gray: bool,
        /// The database kind; only lmdb is written.
        #[arg(long, default_value = "lmdb", value_parser = ["lmdb"])]
        backend: String,
    },
    /// Write the mean image of an LMDB as a .binaryproto.
    #[command(name = "compute-image-mean", alias = "compute_image_mean")]
    ComputeImageMean {
        /// The LMDB folder.
        db: PathBuf,
        /// The .binaryproto to write.
        out: PathBuf,
        /// The database kind; only lmdb is read.
        #[arg(long, default_value = "lmdb", value_parser = ["lmdb"])]
        backend: String,
    },
}

fn summary(r: &TrainReport) {
    println!(
        "Optimization done: {} iterations on {} worker(s) x batch {} in {:.1} s",
        r.iterations,
        r.workers,
        r.batch,
        r.wall.as_secs_f64()
    );
    let per: Vec<String> = r.images_per_sec_per_worker.iter().map(|v| format!("{v:.0}")).collect();
    println!("  throughput: {:.0} images/s in all, per worker [{}]", r.images_per_sec, per.join(", "));
    if !r.stats.is_empty() {
        let stalls: Vec<String> = r.stats.iter().map(|s| format!("{:.1}%", s.stall_fraction * 100.0)).collect();
        let slow: u64 = r.stats.iter().map(|s| s.slow_path_calls).sum();
        println!("  geeps stall fraction per worker [{}]; slow-path calls {slow}", stalls.join(", "));
        // Where the first worker blocked, per iteration: what to look at when the stall is high.
        let first = &r.stats[0];
        let per_iter = |d: std::time::Duration| d.as_secs_f64() * 1e3 / r.iterations.max(1) as f64;
        let blocked: Vec<String> = first
            .calls
            .iter()
            .filter(|(_, c)| per_iter(c.blocked) >= 0.05)
            .map(|(k, c)| format!("{} {:.2}", k.name(), per_iter(c.blocked)))
            .collect();
        if !blocked.is_empty() {
            println!("  worker 0 blocked per iteration (ms): {}", blocked.join(", "));
        }
    }
    if !r.test.is_empty() {
        let t: Vec<String> = r.test.iter().map(|(n, v)| format!("{n} = {v:.4}")).collect();
        println!("  {}: {}", caffe_geeps::cli::report::test_heading(r.test_iteration, r.iterations), t.join(", "));
    }
    if let (Some(csv), Some(png)) = (&r.curve_csv, &r.curve_png) {
        println!("  curve: {} and {}", csv.display(), png.display());
    }
    if let Some(last) = r.snapshots.last() {
        println!("  weights: {}", last.display());
    }
}

/// The GPU `test` or `time` computes on (the first asked for), opened,
/// after saying where it computes; `None` on the CPU.
fn compute_device(command: &str, gpu: &Option<GpuArg>) -> caffe_geeps::Result<Option<Gpu>> {
    let Some(gpu) = gpu else {
        println!("{}", device_log::cpu_line());
        return Ok(None);
    };
    let ordinals = gpu.ordinals()?;
    let Some(&first) = ordinals.first() else {
        return Err(caffe_geeps::Error::config(format!(
            "{command} -gpu {gpu}: the driver sees no GPU (check CUDA_VISIBLE_DEVICES), or run without -gpu"
        )));
    };
    if ordinals.len() > 1 {
        tracing::warn!("{command}: -gpu {gpu}: {command} computes on one GPU, GPU {first}");
    }
    for line in device_log::gpu_lines(&[first])? {
        println!("{line}");
    }
    Gpu::open(first).map(Some)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `time`, printed as Caffe's `caffe time` prints it.
fn time_command(model: &Path, iterations: u32, gpu: &Option<GpuArg>, state: &NetState) -> caffe_geeps::Result<()> {
    let device = compute_device("time", gpu)?;
    let t = caffe_geeps::tools::time::time(model, iterations, state, device.as_ref())?;
    println!("*** Benchmark begins ***");
    println!("Testing for {} iterations of batch {}.", t.iterations.len(), t.batch);
    for (i, d) in t.iterations.iter().enumerate() {
        println!("Iteration: {} forward-backward time: {:.3} ms.", i + 1, ms(*d));
    }
    println!("Average time per layer:");
    for l in &t.layers {
        println!("{:>10}\tforward: {:.5} ms.", l.name, ms(l.forward));
        println!("{:>10}\tbackward: {:.5} ms.", l.name, ms(l.backward));
    }
    println!("Average Forward pass: {:.5} ms.", ms(t.forward));
    println!("Average Backward pass: {:.5} ms.", ms(t.backward));
    println!("Average Forward-Backward: {:.5} ms.", ms(t.mean()));
    println!("Total Time: {:.3} ms.", ms(t.total));
    println!("*** Benchmark ends ***");
    Ok(())
}

/// `test`, printed as Caffe's `caffe test` prints it.
fn test_command(
    model: &Path,
    weights: &Path,
    iterations: Option<u64>,
    gpu: &Option<GpuArg>,
    state: &NetState,
) -> caffe_geeps::Result<()> {
    let device = compute_device("test", gpu)?;
    let s = caffe_geeps::tools::score::score(model, weights, iterations, state, device.as_ref())?;
    if !s.missing.is_empty() {
        tracing::warn!(
            "{} has no weights for layer(s) {}: they keep their fillers' values",
            weights.display(),
            s.missing.join(", ")
        );
    }
    println!("Running for {} iterations.", s.batches.len());
    for (i, outs) in s.batches.iter().enumerate() {
        for (o, values) in s.outputs.iter().zip(outs) {
            for v in values {
                println!("Batch {i}, {} = {v}", o.name);
            }
        }
    }
    println!("Loss: {}", s.loss);
    for o in &s.outputs {
        for m in &o.means {
            if o.loss_weight != 0.0 {
                println!("{} = {m} (* {} = {} loss)", o.name, o.loss_weight, o.loss_weight * m);
            } else {
                println!("{} = {m}", o.name);
            }
        }
    }
    // The trainer's own summary of scalar outputs (what its training log and CI read).
    for (k, o) in s.outputs.iter().enumerate().filter(|(_, o)| o.means.len() == 1) {
        println!("    Test net output #{k}: {} = {}", o.name, o.means[0]);
    }
    Ok(())
}

/// Prints what the driver says about each GPU asked for, as Caffe's `device_query` does.
fn device_query(gpu: &GpuArg) -> caffe_geeps::Result<()> {
    for ordinal in gpu.ordinals()? {
        let p = CudaDevice::probe(ordinal)
            .map_err(|e| caffe_geeps::Error::config(format!("device_query -gpu {ordinal}: {e}")))?;
        let (major, minor) = p.compute_capability;
        println!("Device id:                     {}", p.ordinal);
        println!("Name:                          {}", p.name);
        println!("Compute capability:            {major}.{minor}");
        println!("Total global memory:           {} bytes ({} MiB)", p.total_memory, p.total_memory >> 20);
        println!("Driver CUDA version:           {}.{}", p.driver_version / 1000, p.driver_version % 1000 / 10);
        println!("Visible devices:               {}", p.devices);
    }
    Ok(())
}

fn train_command(args: TrainArgs) -> caffe_geeps::Result<()> {
    let TrainArgs {
        solver,
        workers,
        net,
        wire,
        slack,
        device_memory_mb,
        layers_per_table,
        batches_per_clock,
        weights,
        snapshot,
        resume,
        overwrite,
        max_iter,
        curve,
        no_progress,
        wait_deadline_s,
        gpu,
        cpu_layers,
        sigint_effect,
        sighup_effect,
        state,
    } = args;
    // `-gpu all` asks the driver first, so a missing one is the first thing said.
    let gpus = gpu.map(|g| g.ordinals()).transpose()?;
    let mut s = SolverParam::load(&solver)?;
    state.apply(&mut s);
    if let Some(m) = max_iter {
        if m == 0 {
            return Err(caffe_geeps::Error::config("--max-iter must be at least 1"));
        }
        s.max_iter = m;
    }
    let device = match (gpus, s.gpu) {
        (Some(ordinals), _) => {
            if ordinals.is_empty() {
                return Err(caffe_geeps::Error::config(
                    "-gpu all: the driver sees no GPU (check CUDA_VISIBLE_DEVICES), or run without -gpu",
                ));
            }
            DeviceChoice::Cuda(ordinals)
        }
        (None, Some(id)) => DeviceChoice::Cuda(vec![id]),
        (None, None) => DeviceChoice::Host,
    };
    let opts = TrainOptions {
        ps: PsOptions {
            device,
            layers_on_cpu: cpu_layers,
            slack,
            device_memory: device_memory_mb.unwrap_or(512) << 20,
            budget_from_net: device_memory_mb.is_none(),
            layers_per_table,
            batches_per_clock,
            wait_deadline: Duration::from_secs(wait_deadline_s.max(1)),
            ..PsOptions::default()
        },
        weights,
        verbose: true,
        progress: !no_progress,
        curve_prefix: curve,
        resume: snapshot,
        resume_on_restart: true,
        sigint_effect,
        sighup_effect,
        // The command line feeds no MemoryData layer: such a net is refused at its line.
        data: caffe_geeps::data::DataCache::default(),
        existing: match (resume, overwrite) {
            (true, _) => ExistingSnapshots::Resume,
            (_, true) => ExistingSnapshots::Overwrite,
            _ => ExistingSnapshots::Refuse,
        },
    };
    let launched = net || Cluster::in_environment();
    if let (false, None, DeviceChoice::Cuda(ordinals)) = (launched, workers, &opts.ps.device) {
        if ordinals.len() > 1 {
            // One process per GPU, as Caffe users expect: this command again, under geeps-launch.
            return Err(caffe_geeps::cli::launch::one_process_per_gpu(ordinals.len()));
        }
    }
    // Where the workers compute, as Caffe's log says it.
    match &opts.ps.device {
        DeviceChoice::Cuda(ordinals) => {
            for line in device_log::gpu_lines(ordinals)? {
                println!("{line}");
            }
            if cpu_layers {
                println!("{} (--cpu-layers: the layers compute on the CPU)", device_log::cpu_line());
            }
        }
        DeviceChoice::Host => println!("{}", device_log::cpu_line()),
    }
    if !launched && wire == Some(WireEncoding::Bf16) {
        return Err(caffe_geeps::Error::config(
            "--wire bf16 compresses the updates ranks send over the network, but this run's workers are threads of \
             one process that share memory (--workers): drop --wire, or run several processes (--net under \
             geeps-launch, srun or mpirun)",
        ));
    }
    let cluster = if launched { Cluster::from_env(wire)? } else { Cluster::in_process(workers.unwrap_or(4))? };
    // Ctrl-C, SIGTERM and SIGHUP act as -sigint_effect and -sighup_effect say.
    caffe_geeps::cli::signals::install()?;
    let trained = solve::train(&s, &opts, &cluster);
    let stopped = match &trained {
        Ok(_) => cluster.shutdown(),
        Err(e) => {
            // The other ranks hear it now, not after a shutdown that waits for them.
            cluster.fail(&e.to_string());
            Ok(())
        }
    };
    let report = trained?;
    stopped?;
    if cluster.local_ranks().contains(&0) {
        summary(&report);
    } else if let (Some(rank), Some(s)) = (cluster.local_ranks().first(), report.stats.first()) {
        println!(
            "rank {rank} done: {:.0} images/s, geeps stall {:.1}%",
            report.images_per_sec_per_worker[0],
            s.stall_fraction * 100.0
        );
    }
    Ok(())
}

fn wrote(n: usize, out: &Path) {
    println!("Wrote {n} record(s) to {}", out.display());
}

fn run(cli: Cli) -> caffe_geeps::Result<()> {
    match cli.command {
        Command::Train(args) => train_command(args)?,
        Command::Time { model, iterations, gpu, phase, state } => {
            if phase != Phase::Train {
                return Err(caffe_geeps::Error::config(
                    "-phase TEST: caffe-geeps times forward and backward of the TRAIN net; use -phase TRAIN",
                ));
            }
            time_command(&model, iterations, &gpu, &state.state(phase))?;
        }
        Command::Test { model, weights, iterations, gpu, state } => {
            test_command(&model, &weights, iterations, &gpu, &state.state(Phase::Test))?;
        }
        Command::DeviceQuery { gpu } => device_query(&gpu)?,
        Command::ConvertMnist { images, labels, out, .. } => {
            wrote(convert::convert_mnist(&images, &labels, &out)?, &out)
        }
        Command::ConvertImageset { root, listfile, out, resize_height, resize_width, shuffle, seed, gray, .. } => {
            let opts = ImagesetOptions { resize_height, resize_width, shuffle, seed, gray };
            wrote(convert::convert_imageset(&root, &listfile, &out, &opts)?, &out);
        }
        Command::ComputeImageMean { db, out, .. } => {
            let ((c, h, w), means) = mean::compute_image_mean(&db, &out)?;
            let records = LmdbReader::open(&db)?.len();
            let means: Vec<String> = means.iter().map(|m| format!("{m:.4}")).collect();
            println!(
                "Wrote the mean of {records} record(s) of {}, shape {c}x{h}x{w}, to {}; channel means [{}]",
                db.display(),
                out.display(),
                means.join(", ")
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    // Colour only for a person at a terminal, and never under NO_COLOR.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    match run(Cli::parse_from(args::normalise(std::env::args_os()))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("caffe-geeps: {e}");
            ExitCode::FAILURE
        }
    }
}

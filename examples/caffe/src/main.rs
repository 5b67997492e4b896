//! `caffe-geeps`, the command line: `train --solver S` runs a Caffe solver
//! on a cluster of geeps workers, `test --model M --weights W` evaluates a
//! snapshot. It owns argument parsing and the final summary; it must never
//! train or evaluate by itself (the library does).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use geeps_caffe::cluster::Cluster;
use geeps_caffe::proto::solver::SolverParam;
use geeps_caffe::ps::{DeviceChoice, PsOptions};
use geeps_caffe::train::{self, TrainOptions, TrainReport};

#[derive(Parser, Debug)]
#[command(name = "caffe-geeps", about = "A Caffe-style trainer whose parameters and activations live in geeps")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Train with a Caffe solver prototxt.
    Train {
        /// The solver prototxt (it names the net prototxt).
        #[arg(long)]
        solver: PathBuf,
        /// Data-parallel workers (threads of this process).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Run as one rank of a multi-process cluster: rank, world size and
        /// addresses come from the environment (geeps-launch, srun, mpirun,
        /// torchrun, GEEPS_*; implied when GEEPS_RANK is set). --workers is
        /// then ignored.
        #[arg(long)]
        net: bool,
        /// Staleness bound in clocks: 0 is BSP.
        #[arg(long, default_value_t = 0)]
        slack: u32,
        /// geeps device memory budget per worker, in MiB.
        #[arg(long, default_value_t = 512)]
        device_memory_mb: usize,
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
        /// GPUs (`0`, or `0,1`: worker r takes the r-th, round robin), as
        /// `solver_mode: GPU` does; the layers compute on the CPU.
        #[arg(long)]
        gpu: Option<String>,
    },
    /// Time each layer's forward and backward on the TRAIN net (no geeps).
    Time {
        /// The net prototxt.
        #[arg(long)]
        model: PathBuf,
        /// Iterations to average over.
        #[arg(long, default_value_t = 20)]
        iterations: u32,
    },
    /// Evaluate weights on the TEST phase of a net.
    Test {
        /// The net prototxt.
        #[arg(long)]
        model: PathBuf,
        /// The .caffemodel to evaluate.
        #[arg(long)]
        weights: PathBuf,
        /// Test batches (default: enough to cover the test set once).
        #[arg(long)]
        iterations: Option<u64>,
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
    }
    if !r.test.is_empty() {
        let t: Vec<String> = r.test.iter().map(|(n, v)| format!("{n} = {v:.4}")).collect();
        println!("  test: {}", t.join(", "));
    }
    if let (Some(csv), Some(png)) = (&r.curve_csv, &r.curve_png) {
        println!("  curve: {} and {}", csv.display(), png.display());
    }
    if let Some(last) = r.snapshots.last() {
        println!("  weights: {}", last.display());
    }
}

fn run(cli: Cli) -> geeps_caffe::Result<()> {
    match cli.command {
        Command::Train {
            solver,
            workers,
            net,
            slack,
            device_memory_mb,
            layers_per_table,
            batches_per_clock,
            weights,
            snapshot,
            max_iter,
            curve,
            no_progress,
            wait_deadline_s,
            gpu,
        } => {
            let mut s = SolverParam::load(&solver)?;
            if let Some(m) = max_iter {
                if m == 0 {
                    return Err(geeps_caffe::Error::config("--max-iter must be at least 1"));
                }
                s.max_iter = m;
            }
            let device = match (gpu, s.gpu) {
                (Some(list), _) => DeviceChoice::parse_gpus(&list)?,
                (None, Some(id)) => DeviceChoice::Cuda(vec![id]),
                (None, None) => DeviceChoice::Host,
            };
            let opts = TrainOptions {
                ps: PsOptions {
                    device,
                    slack,
                    device_memory: device_memory_mb << 20,
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
            };
            let cluster =
                if net || Cluster::in_environment() { Cluster::from_env()? } else { Cluster::in_process(workers)? };
            let trained = train::train(&s, &opts, &cluster);
            let stopped = cluster.shutdown();
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
        }
        Command::Time { model, iterations } => {
            let t = geeps_caffe::timing::time(&model, iterations)?;
            println!("Average time per layer over {iterations} iteration(s) of batch {}:", t.batch);
            for (name, kind, f, b) in &t.layers {
                println!(
                    "  {name:>12} ({kind:<15}) forward {:8.3} ms  backward {:8.3} ms",
                    f.as_secs_f64() * 1e3,
                    b.as_secs_f64() * 1e3
                );
            }
            let ms = t.iteration.as_secs_f64() * 1e3;
            println!("Forward-backward: {ms:.3} ms, {:.0} images/s", t.batch as f64 / t.iteration.as_secs_f64());
        }
        Command::Test { model, weights, iterations } => {
            let (outputs, n) = train::test_weights(&model, &weights, iterations)?;
            println!("Tested {} on {n} batch(es) of the TEST phase of {}", weights.display(), model.display());
            for (k, (name, v)) in outputs.iter().enumerate() {
                println!("    Test net output #{k}: {name} = {v}");
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("caffe-geeps: {e}");
            ExitCode::FAILURE
        }
    }
}

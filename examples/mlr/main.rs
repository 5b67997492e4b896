//! Multinomial logistic regression on Fashion-MNIST (the paper's second
//! application), data-parallel over in-process geeps workers. Rank 0 prints
//! the cluster's mean training loss and its test accuracy every epoch, then
//! every worker's geeps stats. The model and training loop live in
//! `train.rs`, which `tests/mlr.rs` reuses.
//!
//! ```text
//! cargo run --release --example mlr -- --workers 4 --epochs 30 --batch 100 --lr 0.1 --slack 0
//! ```

mod train;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use train::{train, TrainConfig};

#[derive(Parser, Debug)]
#[command(about = "Multinomial logistic regression on Fashion-MNIST with geeps (in-process workers)")]
struct Args {
    /// In-process workers, one thread each.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Passes over the training set.
    #[arg(long, default_value_t = 30)]
    epochs: usize,
    /// Minibatch per worker per clock.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Learning rate of the SGD step on the gradient averaged over all workers.
    #[arg(long, default_value_t = 0.1)]
    lr: f32,
    /// Staleness bound in clocks (0 = BSP).
    #[arg(long, default_value_t = 0)]
    slack: u32,
    /// Folder with the gzipped IDX files (train-*-ubyte.gz, t10k-*-ubyte.gz).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data"))]
    data: PathBuf,
    /// Train on only the first N training images.
    #[arg(long)]
    train_images: Option<usize>,
    /// Run as one rank of a multi-process cluster (rank, world and addresses
    /// from the environment: geeps-launch, srun, mpirun, torchrun, GEEPS_*);
    /// `--workers` is then the world size.
    #[arg(long)]
    net: bool,
}

/// One rank of a networked run: prints rank 0's epochs and this rank's stats.
fn run_networked(mut cfg: TrainConfig) -> Result<(), train::BoxError> {
    let mut cluster = geeps::net::NetCluster::from_env()?;
    cfg.workers = cluster.world();
    cfg.verbose &= cluster.rank() == 0;
    let (stats, epochs) = train::train_rank(&cfg, cluster.rank(), cluster.transport())?;
    if let Some(last) = epochs.last() {
        println!("final: train loss {:.4}, test accuracy {:.2}%", last.train_loss, last.test_accuracy * 100.0);
    }
    println!("geeps rank {}: stall {:.1}%  {stats}", cluster.rank(), stats.stall_fraction * 100.0);
    cluster.shutdown()?;
    Ok(())
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    // Colour only for a person at a terminal, and never under NO_COLOR.
    let ansi = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).init();
    let args = Args::parse();
    let cfg = TrainConfig {
        workers: args.workers,
        epochs: args.epochs,
        batch: args.batch,
        lr: args.lr,
        slack: args.slack,
        data_dir: args.data,
        train_limit: args.train_images,
        verbose: true,
        device: None,
    };
    if args.net {
        return match run_networked(cfg) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mlr: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let report = match train(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mlr: {e}");
            return ExitCode::FAILURE;
        }
    };
    let first_loss = report.epochs.first().map_or(f32::NAN, |e| e.train_loss);
    println!(
        "final: train loss {:.4} (epoch 1: {first_loss:.4}), test accuracy {:.2}%, {:.2}s in all (data loading included)",
        report.final_loss,
        report.test_accuracy * 100.0,
        report.elapsed.as_secs_f64()
    );
    for (rank, s) in report.stats.iter().enumerate() {
        println!("geeps worker {rank}: stall {:.1}%  {s}", s.stall_fraction * 100.0);
    }
    ExitCode::SUCCESS
}

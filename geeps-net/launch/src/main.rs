//! `geeps-launch -n N -- <program> [args]`: runs N ranks of a geeps program on
//! this machine, like `torchrun --standalone`. It hosts the rendezvous the
//! ranks use to find each other's keepers, prefixes every output line with
//! the rank, forwards SIGINT (Ctrl-C) and SIGTERM to every rank and waits
//! for them to exit (a second signal kills them), and if any rank fails it
//! stops the others and either restarts them all (`--max-restarts`) or exits
//! non-zero. This file owns the command line and the restart policy; one
//! round of ranks is `generation.rs`'s.

mod blame;
mod generation;
mod process_group;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tokio::signal::unix::{signal as on_signal, SignalKind};

use generation::{Generation, Outcome, Signals};

#[derive(Parser, Debug)]
#[command(name = "geeps-launch", about = "Run N ranks of a geeps program on this machine")]
struct Args {
    /// Number of ranks (processes) to start.
    #[arg(short = 'n', long = "nproc")]
    nproc: usize,
    /// Cluster token shared by the ranks (default: a fresh random one).
    #[arg(long)]
    token: Option<String>,
    /// Seconds the ranks have to find each other at start.
    #[arg(long, default_value_t = 60)]
    rendezvous_timeout: u64,
    /// How many times all ranks are restarted when one fails (torchrun's
    /// convention). Each restart sees GEEPS_RESTART_COUNT (1, 2, ...) and
    /// should resume from its last checkpoint.
    #[arg(long, default_value_t = 0)]
    max_restarts: u32,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

async fn run(args: Args) -> Result<u8, String> {
    if args.nproc == 0 {
        return Err("-n must be at least 1".into());
    }
    let token = args.token.unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    // One id for this launch, the same in every generation: what a restarted
    // rank recognises its own snapshots by.
    let run_id = format!("{:016x}", rand::random::<u64>());
    // Listening before any rank starts: a signal that comes early is still forwarded.
    let mut signals = Signals {
        interrupt: on_signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?,
        terminate: on_signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?,
    };
    let mut restart = 0;
    loop {
        let generation = Generation {
            command: &args.command,
            world: args.nproc,
            token: &token,
            run_id: &run_id,
            rendezvous_timeout: Duration::from_secs(args.rendezvous_timeout),
            restart,
            max_restarts: args.max_restarts,
        };
        match generation.run(&mut signals).await? {
            Outcome::Succeeded => return Ok(0),
            Outcome::Interrupted { code } => return Ok(code),
            Outcome::Failed { rank, name, what, code } => {
                say_who_failed(rank, &name, &what);
                if restart >= args.max_restarts {
                    if args.max_restarts > 0 {
                        eprintln!("geeps-launch: no restarts are left ({} used); giving up", args.max_restarts);
                    }
                    return Ok(code);
                }
                restart += 1;
                eprintln!(
                    "geeps-launch: all {} ranks stopped; restarting them (restart {restart} of {})",
                    args.nproc, args.max_restarts
                );
            }
        }
    }
}

/// The one line that says which rank failed and why.
fn say_who_failed(rank: usize, name: &str, what: &str) {
    debug_assert!(name.starts_with(&format!("rank {rank}")));
    eprintln!("geeps-launch: {name} failed: {what}");
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("geeps-launch: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("geeps-launch: {e}");
            ExitCode::from(2)
        }
    }
}

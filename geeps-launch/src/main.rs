//! `geeps-launch -n N -- <program> [args]`: runs N ranks of a geeps program on
//! this machine, like `torchrun --standalone`. It hosts the rendezvous the
//! ranks use to find each other's keepers, prefixes every output line with
//! the rank, forwards SIGINT (Ctrl-C) and SIGTERM to every rank and waits
//! for them to exit (a second signal kills them), and if any rank fails it
//! stops the others and exits non-zero.

use std::process::{ExitCode, Stdio};
use std::time::Duration;

use clap::Parser;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::signal::unix::{signal as on_signal, SignalKind};
use tokio::sync::mpsc;

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
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Signals a rank's whole process group (the rank and anything it started).
fn signal(pid: u32, sig: libc::c_int) {
    if pid == 0 {
        return;
    }
    // SAFETY: kill(2) on a child's process group; a stale id only yields ESRCH.
    unsafe { libc::kill(-(pid as libc::pid_t), sig) };
}

async fn relay(rank: usize, stream: impl AsyncRead + Unpin, to_stderr: bool) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if to_stderr {
            eprintln!("[{rank}] {line}");
        } else {
            println!("[{rank}] {line}");
        }
    }
}

async fn run(args: Args) -> Result<u8, String> {
    if args.nproc == 0 {
        return Err("-n must be at least 1".into());
    }
    let token = args.token.unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("rendezvous: {e}"))?;
    let rendezvous = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    let world = args.nproc;
    let rv = tokio::spawn(geeps_net::rendezvous::serve(
        listener,
        world,
        token.clone(),
        Duration::from_secs(args.rendezvous_timeout),
    ));

    // Listening before any rank starts: a signal that comes early is still forwarded.
    let mut sigint = on_signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
    let mut sigterm = on_signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut pids = Vec::with_capacity(world);
    for rank in 0..world {
        let mut child = Command::new(&args.command[0])
            .args(&args.command[1..])
            .env("GEEPS_RANK", rank.to_string())
            .env("GEEPS_LOCAL_RANK", rank.to_string())
            .env("GEEPS_WORLD_SIZE", world.to_string())
            .env("GEEPS_RENDEZVOUS", &rendezvous)
            .env("GEEPS_LISTEN", "127.0.0.1")
            .env("GEEPS_TOKEN", &token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so stopping a rank stops what it started too.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", args.command[0]))?;
        pids.push(child.id().unwrap_or(0));
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let relays =
            (out.map(|o| tokio::spawn(relay(rank, o, false))), err.map(|e| tokio::spawn(relay(rank, e, true))));
        let tx = done_tx.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // Let the output drain before reporting the exit, but do not wait
            // on a pipe some orphaned grandchild still holds open.
            for r in [relays.0, relays.1].into_iter().flatten() {
                let abort = r.abort_handle();
                if tokio::time::timeout(Duration::from_secs(2), r).await.is_err() {
                    abort.abort();
                }
            }
            let _ = tx.send((rank, status));
        });
    }

    let mut finished = 0;
    let mut interrupted = false;
    let mut failure: Option<u8> = None;
    while finished < world {
        tokio::select! {
            Some((rank, status)) = done_rx.recv() => {
                finished += 1;
                let ok = matches!(&status, Ok(s) if s.success());
                if !ok && failure.is_none() {
                    let code = status.as_ref().ok().and_then(|s| s.code()).unwrap_or(1).clamp(1, 255) as u8;
                    let what = match &status {
                        Ok(s) => s.to_string(),
                        Err(e) => e.to_string(),
                    };
                    eprintln!("geeps-launch: rank {rank} failed ({what}); stopping the other ranks");
                    failure = Some(code);
                    for &pid in &pids {
                        signal(pid, libc::SIGTERM);
                    }
                    let pids = pids.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        for pid in pids {
                            signal(pid, libc::SIGKILL);
                        }
                    });
                }
            }
            received = async {
                tokio::select! {
                    _ = sigint.recv() => (libc::SIGINT, "SIGINT"),
                    _ = sigterm.recv() => (libc::SIGTERM, "SIGTERM"),
                }
            } => {
                let (sig, name) = received;
                let forward = if interrupted { libc::SIGKILL } else { sig };
                if interrupted {
                    eprintln!("geeps-launch: {name} again; killing the {} ranks still running", world - finished);
                } else {
                    eprintln!(
                        "geeps-launch: {name}; forwarding it to {world} ranks and waiting for them to exit (send it again to kill them)"
                    );
                }
                interrupted = true;
                for &pid in &pids {
                    signal(pid, forward);
                }
                // The shell's convention: 128 + the signal's number.
                failure.get_or_insert(128 + sig as u8);
            }
        }
    }
    rv.abort();
    Ok(failure.unwrap_or(0))
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

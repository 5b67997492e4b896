//! One generation of ranks: a fresh rendezvous, N rank processes started
//! with the cluster's environment, their output relayed, and the way the
//! generation ends — every rank succeeded, one failed (the others are then
//! stopped: SIGTERM, SIGKILL after a grace period; the failure is put on the
//! rank the ranks' own reports name, see `blame.rs`), or the launcher was
//! signalled (forwarded to every rank). It returns only once every rank of
//! the generation has exited, so a restart never overlaps the old ranks. It
//! must never decide whether to restart.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use tokio::signal::unix::Signal;
use tokio::sync::mpsc;

use crate::blame::{blame, rank_name};
use crate::process_group::{relay, signal};

/// How long ranks stopped after another's failure have before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The launcher's SIGINT and SIGTERM streams, shared by every generation.
pub(crate) struct Signals {
    pub interrupt: Signal,
    pub terminate: Signal,
}

/// What starting the ranks once needs to know.
pub(crate) struct Generation<'a> {
    pub command: &'a [String],
    pub world: usize,
    pub token: &'a str,
    /// One id per launch, the same in every generation (GEEPS_RUN_ID).
    pub run_id: &'a str,
    pub rendezvous_timeout: Duration,
    /// 0 for the first generation, then 1, 2, ... (GEEPS_RESTART_COUNT).
    pub restart: u32,
    pub max_restarts: u32,
}

/// How a generation ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Succeeded,
    /// `rank` failed, by the ranks' accounts (`name` says it with its pid
    /// and keeper, `what` why); `code` is the exit status to report.
    Failed {
        rank: usize,
        name: String,
        what: String,
        code: u8,
    },
    /// The launcher was signalled; `code` is 128 + the signal's number.
    Interrupted {
        code: u8,
    },
}

impl Generation<'_> {
    pub(crate) async fn run(&self, signals: &mut Signals) -> Result<Outcome, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("rendezvous: {e}"))?;
        let rendezvous = listener.local_addr().map_err(|e| e.to_string())?.to_string();
        let rv = tokio::spawn(geeps_net::rendezvous::serve(
            listener,
            self.world,
            self.token.to_string(),
            self.rendezvous_timeout,
        ));
        // Where the ranks write their accounts of a failure (removed at the end).
        let reports = std::env::temp_dir().join(format!("geeps-launch-{}-{}", std::process::id(), self.restart));
        let _ = std::fs::remove_dir_all(&reports);
        std::fs::create_dir_all(&reports).map_err(|e| format!("cannot create {}: {e}", reports.display()))?;
        let outcome = self.run_ranks(signals, rv, &rendezvous, &reports).await;
        let _ = std::fs::remove_dir_all(&reports);
        outcome
    }

    async fn run_ranks<T>(
        &self,
        signals: &mut Signals,
        rv: tokio::task::JoinHandle<T>,
        rendezvous: &str,
        reports: &std::path::Path,
    ) -> Result<Outcome, String> {
        let world = self.world;
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut pids = Vec::with_capacity(world);
        for rank in 0..world {
            let started = self.start_rank(rank, rendezvous, reports, done_tx.clone());
            match started {
                Ok(pid) => pids.push(pid),
                Err(e) => {
                    // Ranks already started would wait for the missing one: stop them.
                    for &pid in &pids {
                        signal(pid, libc::SIGKILL);
                    }
                    rv.abort();
                    return Err(e);
                }
            }
        }
        drop(done_tx);

        let mut finished = 0;
        let mut interrupted: Option<u8> = None;
        let mut failure: Option<(usize, String, u8)> = None;
        let mut escalation = None;
        while finished < world {
            tokio::select! {
                Some((rank, status)) = done_rx.recv() => {
                    finished += 1;
                    let ok = matches!(&status, Ok(s) if s.success());
                    if ok || failure.is_some() || interrupted.is_some() {
                        continue;
                    }
                    let code = status.as_ref().ok().and_then(|s| s.code()).unwrap_or(1).clamp(1, 255) as u8;
                    let what = match &status {
                        Ok(s) => s.to_string(),
                        Err(e) => e.to_string(),
                    };
                    eprintln!(
                        "geeps-launch: {} exited ({what}); stopping the other ranks",
                        rank_name(rank, pids.get(rank).copied(), &[])
                    );
                    failure = Some((rank, what, code));
                    for &pid in &pids {
                        signal(pid, libc::SIGTERM);
                    }
                    let pids = pids.clone();
                    escalation = Some(tokio::spawn(async move {
                        tokio::time::sleep(STOP_GRACE).await;
                        for pid in pids {
                            signal(pid, libc::SIGKILL);
                        }
                    }));
                }
                received = async {
                    tokio::select! {
                        _ = signals.interrupt.recv() => (libc::SIGINT, "SIGINT"),
                        _ = signals.terminate.recv() => (libc::SIGTERM, "SIGTERM"),
                    }
                } => {
                    let (sig, name) = received;
                    let forward = if interrupted.is_some() { libc::SIGKILL } else { sig };
                    if interrupted.is_some() {
                        eprintln!("geeps-launch: {name} again; killing the {} ranks still running", world - finished);
                    } else {
                        eprintln!(
                            "geeps-launch: {name}; forwarding it to {world} ranks and waiting for them to exit (send it again to kill them)"
                        );
                    }
                    for &pid in &pids {
                        signal(pid, forward);
                    }
                    // The shell's convention: 128 + the signal's number.
                    interrupted.get_or_insert(128 + sig as u8);
                }
            }
        }
        rv.abort();
        if let Some(task) = escalation {
            // Every rank has exited: their process ids must not be signalled later.
            task.abort();
        }
        Ok(match (interrupted, failure) {
            (Some(code), _) => Outcome::Interrupted { code },
            (None, Some((first, what, code))) => {
                let accounts = geeps_net::failure_report::read_all(reports);
                let b = blame(&accounts, (first, &what));
                Outcome::Failed {
                    rank: b.rank,
                    name: rank_name(b.rank, pids.get(b.rank).copied(), &accounts),
                    what: b.why,
                    code,
                }
            }
            (None, None) => Outcome::Succeeded,
        })
    }

    /// Starts one rank; its exit status is sent on `done` once its output has drained.
    fn start_rank(
        &self,
        rank: usize,
        rendezvous: &str,
        reports: &std::path::Path,
        done: mpsc::UnboundedSender<(usize, std::io::Result<std::process::ExitStatus>)>,
    ) -> Result<u32, String> {
        let mut child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .env("GEEPS_RANK", rank.to_string())
            .env("GEEPS_LOCAL_RANK", rank.to_string())
            .env("GEEPS_WORLD_SIZE", self.world.to_string())
            .env("GEEPS_RENDEZVOUS", rendezvous)
            .env("GEEPS_LISTEN", "127.0.0.1")
            .env("GEEPS_TOKEN", self.token)
            .env("GEEPS_RUN_ID", self.run_id)
            .env("GEEPS_RESTART_COUNT", self.restart.to_string())
            .env("GEEPS_MAX_RESTARTS", self.max_restarts.to_string())
            .env(geeps_net::failure_report::ENV, reports)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so stopping a rank stops what it started too.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start `{}`: {e}", self.command[0]))?;
        let pid = child.id().unwrap_or(0);
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let relays =
            (out.map(|o| tokio::spawn(relay(rank, o, false))), err.map(|e| tokio::spawn(relay(rank, e, true))));
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
            let _ = done.send((rank, status));
        });
        Ok(pid)
    }
}

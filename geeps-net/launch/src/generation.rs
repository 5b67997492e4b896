//! One generation of ranks: a fresh rendezvous (the launcher's own on
//! loopback, or rank 0's on the first host), N rank processes started with
//! the cluster's environment (here, or on their hosts through the
//! remote-exec agent, see `remote.rs`), their output relayed, and the way the
//! generation ends — every rank succeeded, one failed (the others then have
//! a second to hear why from it and exit by themselves, then SIGTERM, then
//! SIGKILL after a grace period; the failure is put on the
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
use crate::hosts::{Host, Placement};
use crate::process_group::{relay, RankControl};
use crate::remote;

/// How long the other ranks have, after one fails, to hear why from it and
/// exit by themselves (saying which rank failed and why) before SIGTERM.
const STOP_NOTICE: Duration = Duration::from_secs(1);

/// How long ranks stopped after another's failure have before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The launcher's SIGINT and SIGTERM streams, shared by every generation.
pub(crate) struct Signals {
    pub interrupt: Signal,
    pub terminate: Signal,
}

/// Where the ranks of a multi-host launch run, and how they are reached.
pub(crate) struct RemoteHosts {
    pub hosts: Vec<Host>,
    /// Every rank's host, by rank.
    pub ranks: Vec<Placement>,
    /// The remote-exec agent (`remote::agent_command`).
    pub agent: String,
    /// `host:port` where rank 0 serves the rendezvous.
    pub rendezvous: String,
    /// This program's path on the hosts.
    pub remote_launcher: String,
    /// The folder the ranks run in.
    pub dir: String,
    /// Variables every rank gets besides the cluster's (`-x`, `GEEPS_*`).
    pub env: Vec<(String, String)>,
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
    /// The hosts, for a multi-host launch; `None`: every rank here.
    pub remote: Option<&'a RemoteHosts>,
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
        let (rendezvous, rv) = match self.remote {
            // Rank 0 serves it on the first host, where every host reaches it.
            Some(remote) => (remote.rendezvous.clone(), None),
            None => {
                let listener =
                    tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| format!("rendezvous: {e}"))?;
                let rendezvous = listener.local_addr().map_err(|e| e.to_string())?.to_string();
                let rv = tokio::spawn(geeps_net::rendezvous::serve(
                    listener,
                    self.world,
                    self.token.to_string(),
                    self.rendezvous_timeout,
                ));
                (rendezvous, Some(rv))
            }
        };
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
        rv: Option<tokio::task::JoinHandle<T>>,
        rendezvous: &str,
        reports: &std::path::Path,
    ) -> Result<Outcome, String> {
        let world = self.world;
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut ranks: Vec<RankControl> = Vec::with_capacity(world);
        for rank in 0..world {
            let started = self.start_rank(rank, rendezvous, reports, done_tx.clone());
            match started {
                Ok(control) => ranks.push(control),
                Err(e) => {
                    // Ranks already started would wait for the missing one: stop them.
                    for r in &ranks {
                        r.signal(libc::SIGKILL);
                    }
                    if let Some(rv) = &rv {
                        rv.abort();
                    }
                    return Err(e);
                }
            }
        }
        drop(done_tx);

        let mut finished = 0;
        let mut interrupted: Option<u8> = None;
        let mut failure: Option<(usize, String, u8)> = None;
        // The next signal for the ranks still running, and when it is due.
        let mut escalation: Option<(libc::c_int, std::pin::Pin<Box<tokio::time::Sleep>>)> = None;
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
                        rank_name(rank, ranks.get(rank).map(RankControl::label), &[])
                    );
                    failure = Some((rank, what, code));
                    escalation = Some((libc::SIGTERM, Box::pin(tokio::time::sleep(STOP_NOTICE))));
                }
                _ = async {
                    match escalation.as_mut() {
                        Some((_, due)) => due.await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some((sig, _)) = escalation.take() {
                        for r in &ranks {
                            r.signal(sig);
                        }
                        if sig == libc::SIGTERM {
                            escalation = Some((libc::SIGKILL, Box::pin(tokio::time::sleep(STOP_GRACE))));
                        }
                    }
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
                    for r in &ranks {
                        r.signal(forward);
                    }
                    // The shell's convention: 128 + the signal's number.
                    interrupted.get_or_insert(128 + sig as u8);
                }
            }
        }
        if let Some(rv) = &rv {
            rv.abort();
        }
        // Every rank has exited: nothing is signalled after this (no escalation outlives the loop).
        Ok(match (interrupted, failure) {
            (Some(code), _) => Outcome::Interrupted { code },
            (None, Some((first, what, code))) => {
                let accounts = geeps_net::failure_report::read_all(reports);
                let b = blame(&accounts, (first, &what));
                Outcome::Failed {
                    rank: b.rank,
                    name: rank_name(b.rank, ranks.get(b.rank).map(RankControl::label), &accounts),
                    what: b.why,
                    code,
                }
            }
            (None, None) => Outcome::Succeeded,
        })
    }

    /// The variables every rank gets, whichever host it runs on.
    fn cluster_env(&self, rank: usize, rendezvous: &str, reports: &std::path::Path) -> Vec<(String, String)> {
        let mut env = vec![
            ("GEEPS_RANK".to_string(), rank.to_string()),
            ("GEEPS_WORLD_SIZE".to_string(), self.world.to_string()),
            ("GEEPS_RENDEZVOUS".to_string(), rendezvous.to_string()),
            ("GEEPS_TOKEN".to_string(), self.token.to_string()),
            ("GEEPS_RUN_ID".to_string(), self.run_id.to_string()),
            ("GEEPS_RESTART_COUNT".to_string(), self.restart.to_string()),
            ("GEEPS_MAX_RESTARTS".to_string(), self.max_restarts.to_string()),
            (geeps_net::failure_report::ENV.to_string(), reports.display().to_string()),
        ];
        match self.remote {
            None => env.extend([
                ("GEEPS_LOCAL_RANK".to_string(), rank.to_string()),
                ("GEEPS_LOCAL_WORLD_SIZE".to_string(), self.world.to_string()),
                ("GEEPS_LISTEN".to_string(), "127.0.0.1".to_string()),
            ]),
            Some(remote) => {
                let place = &remote.ranks[rank];
                // What the launcher passes on first, so the cluster's own variables win.
                env.splice(0..0, remote.env.iter().cloned());
                env.extend([
                    ("GEEPS_LOCAL_RANK".to_string(), place.local_rank.to_string()),
                    ("GEEPS_LOCAL_WORLD_SIZE".to_string(), place.local_world.to_string()),
                    ("GEEPS_RENDEZVOUS_AT_RANK0".to_string(), "1".to_string()),
                ]);
            }
        }
        env
    }

    /// Starts one rank; its exit status is sent on `done` once its output has drained.
    fn start_rank(
        &self,
        rank: usize,
        rendezvous: &str,
        reports: &std::path::Path,
        done: mpsc::UnboundedSender<(usize, std::io::Result<std::process::ExitStatus>)>,
    ) -> Result<RankControl, String> {
        let env = self.cluster_env(rank, rendezvous, reports);
        let mut command = match self.remote {
            None => {
                let mut c = Command::new(&self.command[0]);
                c.args(&self.command[1..]).envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
                c
            }
            Some(remote) => {
                let host = &remote.hosts[remote.ranks[rank].host];
                let words = remote::agent_command(&remote.agent, &host.name, &remote.remote_launcher)?;
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]).stdin(Stdio::piped());
                c
            }
        };
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so stopping a rank stops what it started too.
            .process_group(0)
            .spawn()
            .map_err(|e| match self.remote {
                None => format!("cannot start `{}`: {e}", self.command[0]),
                Some(remote) => format!("cannot start the remote-exec agent `{}` (--rsh-agent): {e}", remote.agent),
            })?;
        let pid = child.id().unwrap_or(0);
        let control = match (self.remote, child.stdin.take()) {
            (Some(remote), Some(stdin)) => {
                let host = remote.hosts[remote.ranks[rank].host].name.clone();
                let start = remote::start_message(&env, &remote.dir, self.command);
                RankControl::Remote { host, agent_pid: pid, signals: remote::control(stdin, start, pid) }
            }
            _ => RankControl::Local(pid),
        };
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
        Ok(control)
    }
}

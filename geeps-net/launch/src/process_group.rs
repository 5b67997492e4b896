//! A rank's process group: signalling it (here, or through the rank
//! server on its host), and relaying its output lines with the rank as
//! prefix. It must never decide when to signal.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc::UnboundedSender;

/// How the launcher reaches a started rank.
pub(crate) enum RankControl {
    /// A process group of this machine.
    Local(u32),
    /// A rank on `host`, through the rank server that the agent process
    /// `agent_pid` (of this machine) talks to.
    Remote { host: String, agent_pid: u32, signals: UnboundedSender<i32> },
}

impl RankControl {
    /// Sends `sig` to the rank's process group; to the agent when the rank
    /// server can no longer be told.
    pub(crate) fn signal(&self, sig: libc::c_int) {
        match self {
            RankControl::Local(pid) => signal(*pid, sig),
            RankControl::Remote { agent_pid, signals, .. } => {
                if signals.send(sig).is_err() {
                    signal(*agent_pid, sig);
                }
            }
        }
    }

    /// How messages name the process: `pid 4242`, `on node02, agent pid 4242`.
    pub(crate) fn label(&self) -> String {
        match self {
            RankControl::Local(pid) => format!("pid {pid}"),
            RankControl::Remote { host, agent_pid, .. } => format!("on {host}, agent pid {agent_pid}"),
        }
    }
}

/// Signals a rank's whole process group (the rank and anything it started).
pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    if pid == 0 {
        return;
    }
    // SAFETY: kill(2) on a child's process group; a stale id only yields ESRCH.
    unsafe { libc::kill(-(pid as libc::pid_t), sig) };
}

/// Copies `stream` line by line to the launcher's stdout or stderr, each
/// line prefixed with `[rank]`.
pub(crate) async fn relay(rank: usize, stream: impl AsyncRead + Unpin, to_stderr: bool) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if to_stderr {
            eprintln!("[{rank}] {line}");
        } else {
            println!("[{rank}] {line}");
        }
    }
}

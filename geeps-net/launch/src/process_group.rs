//! A rank's process group: signalling it, and relaying its output lines
//! with the rank as prefix. It must never decide when to signal.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

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

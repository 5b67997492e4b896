//! Starting a rank on another host: the remote-exec agent's command line
//! (`ssh HOST CMDLINE`, or any agent given with `{host}` where the host
//! goes), and what the launcher tells the rank server at the other end
//! (`rank_server.rs`) on its standard input — the rank's environment (the
//! token among it, so it never shows on a command line), its arguments and
//! folder, then `start`, then one `signal N` line per signal to forward;
//! the end of that input means the launcher is gone. It owns that protocol's
//! launcher side; it never decides when to signal.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use crate::process_group::signal;

/// The agent used when neither `--rsh-agent` nor `GEEPS_RSH_AGENT` says.
pub(crate) const DEFAULT_AGENT: &str = "ssh";

/// After a forwarded SIGKILL, how long the remote side has before the
/// local agent process is killed too (ending the wait on a host that no
/// longer answers).
const AGENT_KILL_GRACE: Duration = Duration::from_secs(1);

/// The agent's argument list for `host`: its words (split on blanks), with
/// `{host}` replaced by the host, or the host appended when no word holds
/// `{host}`; then one argument, a shell command line that runs the rank
/// server — what `ssh` expects. An agent that runs an argument list rather
/// than a command line ends in `sh -c` (`ip netns exec {host} sh -c`).
pub(crate) fn agent_command(agent: &str, host: &str, remote_launcher: &str) -> Result<Vec<String>, String> {
    let mut words: Vec<String> = agent.split_whitespace().map(String::from).collect();
    if words.is_empty() {
        return Err(
            "--rsh-agent is empty; give a remote-exec command such as `ssh` or `ip netns exec {host} sh -c`".into()
        );
    }
    if words.iter().any(|w| w.contains("{host}")) {
        words.iter_mut().for_each(|w| *w = w.replace("{host}", host));
    } else {
        words.push(host.to_string());
    }
    words.push(format!("exec {} --serve-rank", shell_quote(remote_launcher)));
    Ok(words)
}

/// `s` as one word for a POSIX shell.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// One value on one line: backslashes and line ends escaped.
pub(crate) fn escape(s: &str) -> String {
    s.replace('\\', r"\\").replace('\n', r"\n").replace('\r', r"\r")
}

/// What [`escape`] wrote.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The rank server's start: environment, folder, program and arguments.
pub(crate) fn start_message(env: &[(String, String)], dir: &str, command: &[String]) -> String {
    let mut m = String::new();
    for (k, v) in env {
        m += &format!("env {}={}\n", escape(k), escape(v));
    }
    m += &format!("dir {}\n", escape(dir));
    for a in command {
        m += &format!("arg {}\n", escape(a));
    }
    m + "start\n"
}

/// Writes the start message, then every signal sent on the returned
/// channel; a SIGKILL also kills the local agent's process group
/// (`agent_pid`) a moment later. Dropping the sender closes the remote
/// side's input: the rank server then stops its rank.
pub(crate) fn control(mut stdin: ChildStdin, start: String, agent_pid: u32) -> mpsc::UnboundedSender<i32> {
    let (tx, mut rx) = mpsc::unbounded_channel::<i32>();
    tokio::spawn(async move {
        let mut open = stdin.write_all(start.as_bytes()).await.is_ok() && stdin.flush().await.is_ok();
        while let Some(sig) = rx.recv().await {
            if open {
                open =
                    stdin.write_all(format!("signal {sig}\n").as_bytes()).await.is_ok() && stdin.flush().await.is_ok();
            }
            if sig == libc::SIGKILL || !open {
                tokio::spawn(async move {
                    if sig == libc::SIGKILL {
                        tokio::time::sleep(AGENT_KILL_GRACE).await;
                    }
                    signal(agent_pid, sig);
                });
            }
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_gets_the_host_and_one_command_line() {
        let c = agent_command("ssh -o BatchMode=yes", "node02", "/opt/geeps/bin/geeps-launch").unwrap();
        assert_eq!(c, ["ssh", "-o", "BatchMode=yes", "node02", "exec /opt/geeps/bin/geeps-launch --serve-rank"]);
        let c = agent_command("ip netns exec {host} sh -c", "geeps-h1", "/tmp/my dir/geeps-launch").unwrap();
        assert_eq!(c, ["ip", "netns", "exec", "geeps-h1", "sh", "-c", "exec '/tmp/my dir/geeps-launch' --serve-rank"]);
        assert!(agent_command("  ", "h", "x").unwrap_err().contains("--rsh-agent is empty"));
    }

    #[test]
    fn quoting_survives_a_shell() {
        for s in ["plain", "with space", "it's", "", "$HOME `x` \"q\""] {
            let out = std::process::Command::new("sh").arg("-c").arg(format!("printf %s {}", shell_quote(s))).output();
            assert_eq!(String::from_utf8(out.unwrap().stdout).unwrap(), s);
        }
    }

    #[test]
    fn values_survive_one_line_each() {
        for s in ["a=b", "two\nlines", r"back\slash\n", "cr\r", "trailing\\"] {
            let e = escape(s);
            assert!(!e.contains('\n'), "{e}");
            assert_eq!(unescape(&e), s);
        }
        let m = start_message(&[("GEEPS_TOKEN".into(), "s3cret".into())], "/work", &["prog".into(), "a b".into()]);
        assert_eq!(m, "env GEEPS_TOKEN=s3cret\ndir /work\narg prog\narg a b\nstart\n");
    }
}

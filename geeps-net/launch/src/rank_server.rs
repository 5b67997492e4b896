//! `geeps-launch --serve-rank`: the launcher's end on another host, run by
//! the remote-exec agent. It reads the rank's environment, folder and
//! command from its standard input (`remote.rs` writes them), starts the
//! rank in a process group of its own (killed with it should this server
//! die), forwards each `signal N` line to that group, stops the rank
//! (SIGTERM, SIGKILL after a grace period) when its input ends — the
//! launcher or the link to it is gone — and exits with the rank's status
//! (128 + the signal's number when a signal ended it). Its output is the
//! rank's own. It never decides when to signal or restart.

use std::io::BufRead;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode};
use std::time::Duration;

use crate::remote::unescape;

/// How long the rank has between SIGTERM and SIGKILL once the launcher is gone.
const ORPHAN_GRACE: Duration = Duration::from_secs(5);

/// What the launcher sent before `start`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct StartSpec {
    pub env: Vec<(String, String)>,
    pub dir: Option<String>,
    pub command: Vec<String>,
}

/// Reads lines up to `start`.
pub(crate) fn read_spec(input: &mut impl BufRead) -> Result<StartSpec, String> {
    let mut spec = StartSpec::default();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(|e| format!("reading the launcher's message: {e}"))? == 0 {
            return Err("the launcher's message ended before `start` (was this started by geeps-launch?)".into());
        }
        let line = line.trim_end_matches(['\n', '\r']);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "env" => {
                let (k, v) = rest.split_once('=').ok_or_else(|| format!("`{line}`: env needs KEY=VALUE"))?;
                spec.env.push((unescape(k), unescape(v)));
            }
            "dir" => spec.dir = Some(unescape(rest)),
            "arg" => spec.command.push(unescape(rest)),
            "start" if spec.command.is_empty() => return Err("`start` came before any `arg`".into()),
            "start" => return Ok(spec),
            _ => return Err(format!("`{line}` is not part of the launcher's message")),
        }
    }
}

/// The server's main: exits with the rank's status, or 127 when it could
/// not start it.
pub(crate) fn serve() -> ExitCode {
    let mut input = std::io::BufReader::new(std::io::stdin());
    let spec = match read_spec(&mut input) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    // A launcher on another host may name a reports folder that is not here.
    let reports = spec.env.iter().find(|(k, _)| k == geeps_net::failure_report::ENV).map(|(_, v)| v.clone());
    let made_reports =
        reports.as_ref().is_some_and(|d| !std::path::Path::new(d).exists() && std::fs::create_dir_all(d).is_ok());
    let mut cmd = Command::new(&spec.command[0]);
    cmd.args(&spec.command[1..]).envs(spec.env.iter().map(|(k, v)| (k, v))).process_group(0);
    if let Some(dir) = &spec.dir {
        cmd.current_dir(dir);
    }
    // SAFETY: prctl(2) only, between fork and exec: the rank dies with this server.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let place = spec.dir.as_deref().map(|d| format!(" in {d}")).unwrap_or_default();
            return fail(&format!("cannot start `{}`{place}: {e}", spec.command[0]));
        }
    };
    let group = child.id() as libc::pid_t;
    std::thread::spawn(move || forward_signals(input, group));
    let status = child.wait();
    if made_reports {
        if let Some(d) = reports {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    match status {
        Ok(s) => ExitCode::from(s.code().or_else(|| s.signal().map(|n| 128 + n)).unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => fail(&format!("waiting for `{}`: {e}", spec.command[0])),
    }
}

/// Forwards `signal N` lines to the rank's group until the input ends,
/// then stops the rank.
fn forward_signals(mut input: impl BufRead, group: libc::pid_t) {
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(sig) = line.trim().strip_prefix("signal ").and_then(|n| n.parse::<libc::c_int>().ok()) {
            // SAFETY: kill(2) on the rank's group; a stale id only yields ESRCH.
            unsafe { libc::kill(-group, sig) };
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGTERM) };
    std::thread::sleep(ORPHAN_GRACE);
    // SAFETY: as above.
    unsafe { libc::kill(-group, libc::SIGKILL) };
}

fn fail(why: &str) -> ExitCode {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    eprintln!("geeps-launch --serve-rank on {}: {why}", host.trim());
    ExitCode::from(127)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::start_message;

    #[test]
    fn the_start_message_reads_back() {
        let env = vec![("GEEPS_TOKEN".to_string(), "a=b\nc".to_string())];
        let cmd = vec!["prog".to_string(), "--x".to_string(), "two words".to_string()];
        let text = start_message(&env, "/w d", &cmd) + "signal 15\n";
        let mut input = std::io::Cursor::new(text);
        let spec = read_spec(&mut input).unwrap();
        assert_eq!(spec, StartSpec { env, dir: Some("/w d".into()), command: cmd });
        let mut rest = String::new();
        input.read_line(&mut rest).unwrap();
        assert_eq!(rest, "signal 15\n");
    }

    #[test]
    fn a_cut_or_foreign_message_is_refused_saying_so() {
        let e = read_spec(&mut std::io::Cursor::new("arg prog\n")).unwrap_err();
        assert!(e.contains("ended before `start`"), "{e}");
        let e = read_spec(&mut std::io::Cursor::new("start\n")).unwrap_err();
        assert!(e.contains("before any `arg`"), "{e}");
        let e = read_spec(&mut std::io::Cursor::new("rm -rf /\n")).unwrap_err();
        assert!(e.contains("is not part of the launcher's message"), "{e}");
    }
}

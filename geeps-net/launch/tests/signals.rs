//! geeps-launch forwards SIGTERM and SIGINT to its ranks and exits only
//! after they did: a rank that traps the signal gets it, takes its time to
//! finish (a snapshot, say), and the launcher is still there when it is done.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LAUNCH: &str = env!("CARGO_BIN_EXE_geeps-launch");

/// Each rank: says it is ready, and on SIGTERM or SIGINT waits a second (a
/// clean stop that takes time), writes which signal it got, and exits 0.
const RANK: &str = r#"
on() { sleep 1; echo "$1" > "$DIR/got-$GEEPS_RANK"; exit 0; }
trap 'on TERM' TERM
trap 'on INT' INT
touch "$DIR/ready-$GEEPS_RANK"
while :; do sleep 0.1; done
"#;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("geeps-launch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn wait_for(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < deadline, "gave up waiting for {what} after {deadline:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(dir: &Path, ranks: usize) -> Child {
    let child = Command::new(LAUNCH)
        .args(["-n", &ranks.to_string(), "--", "sh", "-c", RANK])
        .env("DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("every rank to start", Duration::from_secs(30), || {
        (0..ranks).all(|r| dir.join(format!("ready-{r}")).exists())
    });
    child
}

fn forwards(sig: libc::c_int, name: &str) {
    let ranks = 2;
    let dir = scratch(name);
    let mut launcher = start(&dir, ranks);
    // SAFETY: kill(2) on the launcher we started and have not reaped.
    assert_eq!(unsafe { libc::kill(launcher.id() as libc::pid_t, sig) }, 0);
    let mut status = None;
    wait_for("the launcher to exit", Duration::from_secs(30), || {
        status = launcher.try_wait().unwrap();
        status.is_some()
    });
    // Checked the moment the launcher is gone: every rank got the signal
    // and had finished (it writes its file a second after the signal).
    for r in 0..ranks {
        let got = std::fs::read_to_string(dir.join(format!("got-{r}")))
            .unwrap_or_else(|_| panic!("rank {r} had not finished handling {name} when the launcher exited"));
        assert_eq!(got.trim(), name, "rank {r}");
    }
    let mut err = String::new();
    std::io::Read::read_to_string(launcher.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.unwrap().code(), Some(128 + sig), "{err}");
    assert!(err.contains(&format!("SIG{name}; forwarding it to {ranks} ranks")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_is_forwarded_to_every_rank_and_waited_for() {
    forwards(libc::SIGTERM, "TERM");
}

#[test]
fn sigint_is_forwarded_to_every_rank_and_waited_for() {
    forwards(libc::SIGINT, "INT");
}

#[test]
fn a_second_signal_kills_ranks_that_do_not_stop() {
    let dir = scratch("stubborn");
    // Ranks that ignore SIGTERM.
    let mut launcher = Command::new(LAUNCH)
        .args([
            "-n",
            "2",
            "--",
            "sh",
            "-c",
            "trap '' TERM; touch \"$DIR/ready-$GEEPS_RANK\"; while :; do sleep 0.1; done",
        ])
        .env("DIR", &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("every rank to start", Duration::from_secs(30), || {
        (0..2).all(|r| dir.join(format!("ready-{r}")).exists())
    });
    let pid = launcher.id() as libc::pid_t;
    // SAFETY: kill(2) on the launcher we started and have not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    std::thread::sleep(Duration::from_millis(500));
    assert!(launcher.try_wait().unwrap().is_none(), "the launcher left ranks that were still running");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut status = None;
    wait_for("the launcher to exit after the second signal", Duration::from_secs(30), || {
        status = launcher.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(143));
    let _ = std::fs::remove_dir_all(&dir);
}

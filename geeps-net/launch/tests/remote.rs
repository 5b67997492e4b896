//! `geeps-launch --hosts` with an agent that runs the rank server on this
//! machine (`env GEEPS_TEST_HOST={host} sh -c`), so the multi-host protocol
//! is checked in the default suite without root or a network: each rank's
//! place, token, rendezvous and passed variables; a failing rank's status;
//! signals forwarded through the rank server; no rank left behind by a
//! launcher killed outright. The same across real addresses, with geeps
//! jobs, partitions and restarts, is `scripts/netns-check` (namespace hosts).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LAUNCH: &str = env!("CARGO_BIN_EXE_geeps-launch");
const AGENT: &str = "env GEEPS_TEST_HOST={host} sh -c";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("geeps-launch-remote-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// geeps-launch on `hosts` running `sh -c script`.
fn launcher(hosts: &str, extra: &[&str], script: &str) -> Command {
    let mut c = Command::new(LAUNCH);
    c.args(["--hosts", hosts, "--rsh-agent", AGENT, "--rendezvous", "127.0.0.1:9"])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .env_remove("GEEPS_RSH_AGENT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Waits until `dir` holds `n` files, or `within` has passed.
fn wait_for_files(dir: &Path, n: usize, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0) >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[test]
fn every_rank_gets_its_host_its_place_the_token_and_the_rendezvous() {
    let script = r#"echo "on $GEEPS_TEST_HOST rank $GEEPS_RANK/$GEEPS_WORLD_SIZE local $GEEPS_LOCAL_RANK/$GEEPS_LOCAL_WORLD_SIZE rv $GEEPS_RENDEZVOUS at0 $GEEPS_RENDEZVOUS_AT_RANK0 token ${#GEEPS_TOKEN} x $MY_X listen ${GEEPS_LISTEN:-unset} dir $PWD""#;
    let out = launcher("hA,hB:2", &["-x", "MY_X=yes"], script).env("GEEPS_LISTEN", "10.0.0.9").output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let dir = std::env::current_dir().unwrap();
    let tail = format!("rv 127.0.0.1:9 at0 1 token 32 x yes listen 10.0.0.9 dir {}", dir.display());
    for line in [
        format!("[0] on hA rank 0/3 local 0/1 {tail}"),
        format!("[1] on hB rank 1/3 local 0/2 {tail}"),
        format!("[2] on hB rank 2/3 local 1/2 {tail}"),
    ] {
        assert!(all.lines().any(|l| l == line), "no `{line}` in:\n{all}");
    }
    assert!(all.contains("3 ranks on 2 hosts through `env GEEPS_TEST_HOST={host} sh -c`"), "{all}");
}

#[test]
fn a_host_file_as_mpirun_and_pbs_write_it_places_the_ranks() {
    let dir = scratch("hostfile");
    let file = dir.join("hosts");
    // PBS lists hA once per rank; Open MPI spaces its `slots = K`.
    std::fs::write(&file, "# nodes\nhA\nhB slots = 2 max_slots=4\nhA\nann@hC:1\n").unwrap();
    let script = r#"echo "on $GEEPS_TEST_HOST rank $GEEPS_RANK/$GEEPS_WORLD_SIZE local $GEEPS_LOCAL_RANK/$GEEPS_LOCAL_WORLD_SIZE""#;
    let out = launcher(file.to_str().unwrap(), &[], script).output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for line in [
        "[0] on hA rank 0/5 local 0/2",
        "[1] on hA rank 1/5 local 1/2",
        "[2] on hB rank 2/5 local 0/2",
        "[3] on hB rank 3/5 local 1/2",
        "[4] on ann@hC rank 4/5 local 0/1",
    ] {
        assert!(all.lines().any(|l| l == line), "no `{line}` in:\n{all}");
    }
    // -n below the hosts' total: the first ranks, host by host.
    let out = launcher(file.to_str().unwrap(), &["-n", "3"], script).output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for line in ["[0] on hA rank 0/3 local 0/2", "[1] on hA rank 1/3 local 1/2", "[2] on hB rank 2/3 local 0/1"] {
        assert!(all.lines().any(|l| l == line), "no `{line}` in:\n{all}");
    }
    assert!(all.contains("3 ranks on 2 hosts"), "{all}");
    // More ranks than a host's max_slots: refused before anything starts.
    std::fs::write(&file, "hA max_slots=2\nhB\n").unwrap();
    let out = launcher(file.to_str().unwrap(), &["--ranks-per-host", "3"], "touch ran").output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("hA is given 3 ranks but takes at most 2 (max_slots=2)"), "{all}");
    assert!(!Path::new("ran").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_rank_stops_the_others_and_its_status_is_the_launchers() {
    let start = Instant::now();
    let script = r#"if [ "$GEEPS_RANK" = 1 ]; then exit 3; fi; exec sleep 30"#;
    let out = launcher("hA,hB,hC", &[], script).output().unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(3), "{all}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}: {all}", start.elapsed());
    assert!(all.contains("rank 1 (on hB, agent pid"), "{all}");
    let out = launcher("hA,/no/such/file", &[], "true").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn sigterm_reaches_every_remote_rank_through_its_server() {
    let dir = scratch("sigterm");
    let script = format!(
        r#"trap 'echo stopped > {d}/done-$GEEPS_RANK; exit 0' TERM; touch {d}/up-$GEEPS_RANK; while :; do sleep 0.05; done"#,
        d = dir.display()
    );
    let mut child = launcher("hA,hB", &[], &script).spawn().unwrap();
    assert!(wait_for_files(&dir, 2, Duration::from_secs(20)), "the ranks never started");
    // SAFETY: SIGTERM to the launcher this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    for rank in 0..2 {
        let said = std::fs::read_to_string(dir.join(format!("done-{rank}"))).unwrap_or_default();
        assert_eq!(said, "stopped\n", "rank {rank} did not see SIGTERM");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_launcher_killed_outright_leaves_no_remote_rank_behind() {
    let dir = scratch("sigkill");
    let script = format!(r#"echo $$ > {d}/pid-$GEEPS_RANK; exec sleep 60"#, d = dir.display());
    let mut child = launcher("hA,hB", &[], &script).spawn().unwrap();
    assert!(wait_for_files(&dir, 2, Duration::from_secs(20)), "the ranks never started");
    std::thread::sleep(Duration::from_millis(100));
    let pids: Vec<i32> = (0..2)
        .map(|r| std::fs::read_to_string(dir.join(format!("pid-{r}"))).unwrap().trim().parse().unwrap())
        .collect();
    assert!(pids.iter().all(|&p| alive(p)));
    child.kill().unwrap();
    child.wait().unwrap();
    // The servers see their input end and stop their ranks (SIGTERM at once).
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(pids.iter().all(|&p| !alive(p)), "ranks {pids:?} outlived the launcher");
    let _ = std::fs::remove_dir_all(&dir);
}

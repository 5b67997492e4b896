//! Multi-process tests: every rank is its own process on loopback. The test
//! binary re-runs itself as the ranks (`GEEPS_TEST_CHILD` names the role), so
//! it has its own harness and prints the plain `N passed, N failed` summary.
//!
//! - the core's consistency property over 3 processes started by geeps-launch;
//! - MLR trained by 4 processes via geeps-launch reaches the same loss as 4
//!   in-process workers under BSP;
//! - a rank killed mid-training makes every other rank's blocked call fail
//!   with an error naming it, well within the peer timeout;
//! - `--max-restarts`: all ranks restarted after one fails, a new cluster
//!   formed each time, and the launcher gives up once the restarts are spent.

extern crate geeps_core as geeps;

use geeps_testkit::consistency as consistency_case;
#[allow(dead_code)]
#[path = "../../../examples/mlr/train.rs"]
mod train;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use geeps_core::{keys, Config, Geeps, Slack};
use geeps_net::{ClusterSpec, NetCluster, NetOptions};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

const LAUNCH: &str = env!("CARGO_BIN_EXE_geeps-launch");

fn data_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/data"))
}

fn mlr_config(workers: usize) -> train::TrainConfig {
    train::TrainConfig {
        workers,
        epochs: 2,
        batch: 50,
        lr: 0.1,
        slack: 0,
        data_dir: data_dir(),
        train_limit: Some(4000),
        verbose: false,
        // GEEPS_TEST_DEVICE=cuda: every rank keeps its rows on a CUDA device.
        device: match geeps_testkit::Backend::from_env() {
            geeps_testkit::Backend::Host => None,
            #[allow(unreachable_patterns)]
            gpu => Some(train::DeviceFactory(std::sync::Arc::new(move || Ok(gpu.device(16 << 20))))),
        },
    }
}

fn child_options() -> NetOptions {
    NetOptions::default().with_peer_timeout(Duration::from_secs(10)).with_heartbeat(Duration::from_millis(200))
}

/// A child process: joins the cluster, plays `role`, and leaves as a
/// program should: `shutdown` after success, `fail` with the cause after an
/// error (so the others hear it at once).
fn child(role: &str) -> Result<(), String> {
    let mut cluster = NetCluster::start(ClusterSpec::from_env(child_options()).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    match play(role, &mut cluster) {
        Ok(()) => cluster.shutdown().map_err(|e| e.to_string()),
        Err(e) => {
            cluster.fail(&e);
            Err(e)
        }
    }
}

/// A BSP loop over a 4-row table for `clocks` clocks, calling `at_clock`
/// before each. On an error the cluster hears it before the instance goes
/// (a worker that left is not waited for: the others must fail, not train
/// on without it).
fn bsp_loop(
    cluster: &mut NetCluster,
    clocks: u64,
    mut at_clock: impl FnMut(u64) -> Result<(), String>,
) -> Result<(), String> {
    let mut b = Geeps::builder(Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(120)));
    let w = b.parameter_table("w", 4);
    b.transport(cluster.transport());
    let ps = b.build().map_err(|e| e.to_string())?;
    let mut run = || -> Result<(), String> {
        ps.finish_virtual_iteration().map_err(|e| e.to_string())?;
        for clock in 0..clocks {
            at_clock(clock)?;
            let mut u = ps.pre_update_keys(&keys(w, 0..4)).map_err(|e| e.to_string())?;
            u.as_mut_slice().map_err(|e| e.to_string())?.fill(1.0);
            u.update().map_err(|e| e.to_string())?;
            ps.table_clock(w).map_err(|e| e.to_string())?;
            let r = ps.read_keys(&keys(w, 0..4), Slack::BSP).map_err(|e| e.to_string())?;
            r.post().map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    if let Err(e) = run() {
        cluster.fail(&e);
        return Err(e);
    }
    ps.shutdown().map_err(|e| e.to_string())
}

/// The roles a child process can play.
fn play(role: &str, cluster: &mut NetCluster) -> Result<(), String> {
    let rank = cluster.rank();
    match role {
        "fails_alone" => {
            // Rank 2 fails on its own (a snapshot that cannot be written, say) at clock 3.
            bsp_loop(cluster, 40, |clock| {
                if rank == 2 && clock == 3 {
                    return Err("snapshot: cannot write 4096 bytes: No space left on device".into());
                }
                Ok(())
            })?;
        }
        "stops" => {
            // Rank 1 stops (SIGSTOP) at clock 3 and never exits by itself.
            bsp_loop(cluster, 40, |clock| {
                if rank == 1 && clock == 3 {
                    // SAFETY: raising SIGSTOP on ourselves; the launcher kills us later.
                    unsafe { libc::raise(libc::SIGSTOP) };
                }
                Ok(())
            })?;
        }
        "mlr" => {
            let (_, epochs) = train::train_rank(&mlr_config(cluster.world()), rank, cluster.transport())
                .map_err(|e| e.to_string())?;
            if let Some(last) = epochs.last() {
                println!("MLR_RESULT {:.6} {:.6}", last.train_loss, last.test_accuracy);
            }
        }
        "consistency" => {
            let text = std::env::var("GEEPS_TEST_CASE").map_err(|_| "GEEPS_TEST_CASE unset".to_string())?;
            let case = consistency_case::Case::decode(&text)?;
            consistency_case::run_rank(&case, rank, cluster.transport())?;
        }
        "victim" => {
            let mut b = Geeps::builder(Config::default().with_row_width(8).with_wait_deadline(Duration::from_secs(60)));
            let w = b.parameter_table("w", 4);
            b.transport(cluster.transport());
            let ps = b.build().map_err(|e| e.to_string())?;
            let r = ps.virtual_read(&keys(w, 0..4), Slack::BSP).map_err(|e| e.to_string())?;
            ps.virtual_post_read(r).map_err(|e| e.to_string())?;
            ps.virtual_table_clock(w).map_err(|e| e.to_string())?;
            ps.finish_virtual_iteration().map_err(|e| e.to_string())?;
            let mut last_ok = Instant::now();
            for clock in 0..1000 {
                if rank == 2 && clock == 5 {
                    // SAFETY: raising SIGKILL on ourselves; nothing runs after it.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                match ps.read(r) {
                    Ok(buf) => drop(buf),
                    Err(e) => {
                        println!("FAILED_WITH after {} ms: {e}", last_ok.elapsed().as_millis());
                        // Survivors stop here: the cluster cannot go on. They linger a moment first, so
                        // one survivor's exit (its keeper closing) never reaches another survivor before
                        // the news of rank 2 does: each must be told of rank 2, not of the other's exit.
                        std::thread::sleep(Duration::from_secs(1));
                        std::process::exit(if e.to_string().contains("rank 2") { 0 } else { 1 });
                    }
                }
                last_ok = Instant::now();
                ps.table_clock(w).map_err(|e| e.to_string())?;
            }
            return Err("the lost rank was never noticed".into());
        }
        "flaky" => {
            // Generation 0: rank 1 dies mid-training. Later generations run to the end.
            let restart: u32 = std::env::var("GEEPS_RESTART_COUNT").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut b = Geeps::builder(Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(60)));
            let w = b.parameter_table("w", 6);
            b.transport(cluster.transport());
            let ps = b.build().map_err(|e| e.to_string())?;
            let r = ps.virtual_read(&keys(w, 0..6), Slack::BSP).map_err(|e| e.to_string())?;
            let u = ps.virtual_pre_update(&keys(w, 0..6)).map_err(|e| e.to_string())?;
            ps.virtual_update(u).map_err(|e| e.to_string())?;
            ps.virtual_post_read(r).map_err(|e| e.to_string())?;
            ps.virtual_table_clock(w).map_err(|e| e.to_string())?;
            ps.finish_virtual_iteration().map_err(|e| e.to_string())?;
            for clock in 0..20 {
                if restart == 0 && rank == 1 && clock == 3 {
                    // SAFETY: raising SIGKILL on ourselves; nothing runs after it.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                let seen = ps.read(r).map_err(|e| e.to_string())?;
                // BSP: every rank's updates of the earlier clocks, and at most
                // the other ranks' updates of this one.
                let world = cluster.world();
                let (low, high) = ((clock * world) as f32, (clock * world + world - 1) as f32);
                let rows = seen.as_slice().map_err(|e| e.to_string())?;
                if rows.iter().any(|&v| v < low || v > high) {
                    return Err(format!("clock {clock}: rows {rows:?}, expected each in {low}..={high}"));
                }
                let mut delta = ps.pre_update(u).map_err(|e| e.to_string())?;
                delta.as_mut_slice().map_err(|e| e.to_string())?.fill(1.0);
                delta.update().map_err(|e| e.to_string())?;
                seen.post().map_err(|e| e.to_string())?;
                ps.table_clock(w).map_err(|e| e.to_string())?;
            }
            println!("FLAKY_DONE restart {restart}");
        }
        other => return Err(format!("unknown role {other}")),
    }
    Ok(())
}

/// Whether geeps-launch's output puts the failure on `rank`.
fn blamed(text: &str, rank: usize) -> bool {
    text.lines().any(|l| l.starts_with(&format!("geeps-launch: rank {rank} ")) && l.contains(" failed: "))
}

/// geeps-launch -n `n` running this binary as `role`, expected to fail:
/// its output, exit status and how long it ran.
fn launch_failing(n: usize, role: &str) -> Result<(String, std::process::ExitStatus, Duration), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let out = Command::new(LAUNCH)
        .arg("-n")
        .arg(n.to_string())
        .arg("--")
        .arg(exe)
        .env("GEEPS_TEST_CHILD", role)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("geeps-launch: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((text, out.status, start.elapsed()))
}

fn a_rank_failing_alone_is_named_with_its_cause_at_once() -> Result<(), String> {
    let (text, status, took) = launch_failing(4, "fails_alone")?;
    let cause = "No space left on device";
    // The other ranks hear which rank failed and why, without waiting for
    // shutdown_timeout (60 s) or the peer timeout (10 s); the first of them
    // to exit says so (the launcher stops the rest).
    let told = text
        .lines()
        .any(|l| !l.starts_with("[2] ") && l.starts_with('[') && l.contains("rank 2 failed") && l.contains(cause));
    if !told {
        return Err(format!("no other rank was told that rank 2 failed with its cause:\n{text}"));
    }
    let named = text.lines().any(|l| {
        l.starts_with("geeps-launch: rank 2 (pid ")
            && l.contains(&format!("failed: snapshot: cannot write 4096 bytes: {cause}"))
    });
    if status.success() || !named || took > Duration::from_secs(9) {
        return Err(format!(
            "expected geeps-launch to name rank 2 and its cause within seconds; {status} after {took:?}:\n{text}"
        ));
    }
    Ok(())
}

fn a_stopped_rank_is_named_not_the_first_to_exit() -> Result<(), String> {
    let (text, status, took) = launch_failing(4, "stops")?;
    // Rank 1 never exits by itself; the others lose it after the peer timeout and exit first.
    let named = text
        .lines()
        .any(|l| l.starts_with("geeps-launch: rank 1 (pid ") && l.contains("failed: lost, by the account of rank(s)"));
    if status.success() || !named || took > Duration::from_secs(40) {
        return Err(format!("expected geeps-launch to name the stopped rank 1; {status} after {took:?}:\n{text}"));
    }
    Ok(())
}

fn launch(n: usize, role: &str, env: &[(&str, String)]) -> Result<String, String> {
    launch_with(&["-n".into(), n.to_string()], role, env)
}

/// geeps-launch with `args` running this binary as `role`; its output, or
/// why it failed.
fn launch_with(args: &[String], role: &str, env: &[(&str, String)]) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(LAUNCH);
    cmd.args(args).arg("--").arg(exe).env("GEEPS_TEST_CHILD", role).env_remove("GEEPS_RSH_AGENT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| format!("geeps-launch: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("geeps-launch {} ({role}) failed: {}\n{text}", args.join(" "), out.status));
    }
    Ok(text)
}

fn consistency_over_three_processes() -> Result<(), String> {
    let mut runner = TestRunner::default();
    let strategy = consistency_case::case();
    let mut ran = 0;
    while ran < 6 {
        let case = strategy.new_tree(&mut runner).map_err(|e| e.to_string())?.current();
        if case.workers != 3 {
            continue;
        }
        launch(3, "consistency", &[("GEEPS_TEST_CASE", case.encode())]).map_err(|e| format!("case {case:?}: {e}"))?;
        ran += 1;
    }
    Ok(())
}

/// Two ranks on one "host" given as an IPv6 address: `--hosts [::1]:2`
/// through a local agent, the rendezvous at `[::1]:PORT`, the keepers on
/// the interface that routes there.
fn mlr_over_ipv6_hosts() -> Result<(), String> {
    let Ok(probe) = std::net::TcpListener::bind("[::1]:0") else {
        println!("skipped mlr_over_ipv6_hosts: this machine has no IPv6 loopback (::1)");
        return Ok(());
    };
    let port = probe.local_addr().map_err(|e| e.to_string())?.port();
    drop(probe);
    let args: Vec<String> = ["--hosts", "[::1]:2", "--rsh-agent", "env GEEPS_TEST_HOST={host} sh -c", "--rendezvous"]
        .into_iter()
        .map(String::from)
        .chain([format!("[::1]:{port}")])
        .collect();
    let text = launch_with(&args, "mlr", &[])?;
    let loss = text.lines().find_map(|l| l.split("MLR_RESULT ").nth(1)).and_then(|r| r.split(' ').next());
    match loss.map(str::parse::<f32>) {
        Some(Ok(loss)) if loss < 1.0 => Ok(()),
        _ => Err(format!("geeps-launch --hosts [::1]:2: the loss should fall below 1.0\n{text}")),
    }
}

fn mlr_four_processes_match_in_process() -> Result<(), String> {
    let local = train::train(&mlr_config(4)).map_err(|e| e.to_string())?;
    let out = launch(4, "mlr", &[])?;
    let line =
        out.lines().find_map(|l| l.split("MLR_RESULT ").nth(1)).ok_or_else(|| format!("no result in:\n{out}"))?;
    let mut it = line.split_whitespace().map(|v| v.parse::<f32>().unwrap_or(f32::NAN));
    let (loss, acc) = (it.next().unwrap_or(f32::NAN), it.next().unwrap_or(f32::NAN));
    // BSP: the same updates every clock; only the keepers' summation order may differ.
    if (loss - local.final_loss).abs() > 1e-3 || (acc - local.test_accuracy).abs() > 2e-3 {
        return Err(format!(
            "4 processes: loss {loss} acc {acc}; 4 in-process workers: loss {} acc {}",
            local.final_loss, local.test_accuracy
        ));
    }
    if local.final_loss.is_nan() || local.final_loss >= 1.0 {
        return Err(format!("loss {} did not fall below 1.0", local.final_loss));
    }
    Ok(())
}

fn killed_rank_is_named_by_the_others() -> Result<(), String> {
    // Started without the launcher, which would stop the others itself.
    let world = 3;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let server = listener.local_addr().map_err(|e| e.to_string())?.to_string();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let rendezvous = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).expect("listener");
            geeps_net::rendezvous::serve(l, world, "t".into(), Duration::from_secs(30)).await
        })
    });
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let children: Vec<_> = (0..world)
        .map(|rank| {
            Command::new(&exe)
                .env("GEEPS_TEST_CHILD", "victim")
                .env("GEEPS_RANK", rank.to_string())
                .env("GEEPS_WORLD_SIZE", world.to_string())
                .env("GEEPS_RENDEZVOUS", &server)
                .env("GEEPS_LISTEN", "127.0.0.1")
                .env("GEEPS_TOKEN", "t")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output()).collect();
    let _ = rendezvous.join();
    let elapsed = start.elapsed();
    for (rank, out) in outputs.into_iter().enumerate() {
        let out = out.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if rank == 2 {
            continue;
        }
        if !out.status.success() || !text.contains("FAILED_WITH") {
            return Err(format!("rank {rank} did not fail cleanly naming rank 2 ({}):\n{text}", out.status));
        }
    }
    // Detection rides on the closed connections, not on the 10 s peer timeout.
    if elapsed > Duration::from_secs(9) {
        return Err(format!("the survivors took {elapsed:?} to notice"));
    }
    Ok(())
}

fn launcher_prefixes_output_and_fails_when_a_rank_fails() -> Result<(), String> {
    let run = |script: &str| {
        Command::new(LAUNCH)
            .args(["-n", "3", "--", "sh", "-c", script])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("geeps-launch: {e}"))
    };
    let ok = run("echo hello from $GEEPS_RANK of $GEEPS_WORLD_SIZE")?;
    let text = String::from_utf8_lossy(&ok.stdout).to_string();
    if !ok.status.success() || !(0..3).all(|r| text.contains(&format!("[{r}] hello from {r} of 3"))) {
        return Err(format!("expected prefixed lines from 3 ranks, got {}:\n{text}", ok.status));
    }
    // Rank 1 fails at once; the others would sleep for a minute: they must be stopped.
    let start = Instant::now();
    let bad = run("if [ $GEEPS_RANK = 1 ]; then exit 7; fi; sleep 60")?;
    let err = String::from_utf8_lossy(&bad.stderr).to_string();
    if bad.status.code() != Some(7) || !blamed(&err, 1) || start.elapsed() > Duration::from_secs(20) {
        return Err(format!(
            "expected exit 7 naming rank 1 within seconds, got {:?} after {:?}:\n{err}",
            bad.status,
            start.elapsed()
        ));
    }
    Ok(())
}

fn launcher_restarts_every_rank_until_the_restarts_are_spent() -> Result<(), String> {
    let run = |max_restarts: u32, script: &str| {
        Command::new(LAUNCH)
            .args(["-n", "3", "--max-restarts", &max_restarts.to_string(), "--", "sh", "-c", script])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("geeps-launch: {e}"))
    };
    // Rank 1 fails in the first two generations; the third succeeds.
    let script = "if [ $GEEPS_RANK = 1 ] && [ $GEEPS_RESTART_COUNT -lt 2 ]; then exit 5; fi; \
                  echo gen $GEEPS_RESTART_COUNT of $GEEPS_MAX_RESTARTS; sleep 0.2";
    let out = run(3, script)?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let restarted = blamed(&stderr, 1) && stderr.contains("(restart 2 of 3)");
    let finished = (0..3).all(|r| stdout.contains(&format!("[{r}] gen 2 of 3")));
    if !out.status.success() || !restarted || !finished || stderr.contains("restart 3 of 3") {
        return Err(format!("expected success after two restarts, got {}:\n{stdout}{stderr}", out.status));
    }
    // One restart allowed, and every generation fails: the second failure ends it.
    let out = run(1, "if [ $GEEPS_RANK = 1 ]; then exit 5; fi; sleep 60")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(5) || !stderr.contains("(restart 1 of 1)") || !stderr.contains("no restarts are left")
    {
        return Err(format!("expected exit 5 after one restart, got {}:\n{stderr}", out.status));
    }
    Ok(())
}

fn killed_rank_restarts_the_cluster() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(LAUNCH)
        .args(["-n", "3", "--max-restarts", "2", "--"])
        .arg(exe)
        .env("GEEPS_TEST_CHILD", "flaky")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("geeps-launch: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let killed = blamed(&text, 1) && text.contains("(restart 1 of 2)");
    let finished = (0..3).all(|r| text.contains(&format!("[{r}] FLAKY_DONE restart 1")));
    if !out.status.success() || !killed || !finished {
        return Err(format!("expected the killed generation to be restarted and finish, got {}:\n{text}", out.status));
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Ok(role) = std::env::var("GEEPS_TEST_CHILD") {
        return match child(&role) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("child {role}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    type Test = fn() -> Result<(), String>;
    let tests: [(&str, Test); 9] = [
        ("launcher_prefixes_output_and_fails_when_a_rank_fails", launcher_prefixes_output_and_fails_when_a_rank_fails),
        (
            "launcher_restarts_every_rank_until_the_restarts_are_spent",
            launcher_restarts_every_rank_until_the_restarts_are_spent,
        ),
        ("killed_rank_restarts_the_cluster", killed_rank_restarts_the_cluster),
        ("consistency_over_three_processes", consistency_over_three_processes),
        ("mlr_four_processes_match_in_process", mlr_four_processes_match_in_process),
        ("mlr_over_ipv6_hosts", mlr_over_ipv6_hosts),
        ("killed_rank_is_named_by_the_others", killed_rank_is_named_by_the_others),
        ("a_rank_failing_alone_is_named_with_its_cause_at_once", a_rank_failing_alone_is_named_with_its_cause_at_once),
        ("a_stopped_rank_is_named_not_the_first_to_exit", a_stopped_rank_is_named_not_the_first_to_exit),
    ];
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let (mut passed, mut failed) = (0, 0);
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let start = Instant::now();
        let result = std::panic::catch_unwind(test).unwrap_or_else(|_| Err("panicked".into()));
        match result {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok ({:.1}s)", start.elapsed().as_secs_f64());
            }
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED\n{e}");
            }
        }
    }
    println!("\n{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

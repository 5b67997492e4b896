//! Snapshot and resume: every snapshot writes geeps' checkpoint (tables and
//! each worker's momentum) beside the `.caffemodel` and `.solverstate`; a
//! run resumed from a snapshot ends with the same weights, bit for bit, as
//! one never stopped (BSP); and a 4-rank job under `geeps-launch
//! --max-restarts 3` whose rank is killed with SIGKILL mid-training
//! restarts from its newest snapshot and ends with the weights of a run
//! never killed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::caffe::SolverState;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{train, TrainOptions};

fn quiet() -> TrainOptions {
    TrainOptions::default()
}

fn solver_at(dir: &Path, prefix: &str, max_iter: u64) -> SolverParam {
    let extra = format!("snapshot: 10\nsnapshot_prefix: \"{}\"", dir.join(prefix).display());
    let path = common::write(dir, &common::small_net(16), &common::solver("net.prototxt", max_iter, 4, 10, &extra));
    SolverParam::load(&path).unwrap()
}

fn bits(params: &[Vec<f32>]) -> Vec<u32> {
    params.iter().flatten().map(|v| v.to_bits()).collect()
}

#[test]
fn a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one() {
    let dir = common::scratch("resume");
    let solver = solver_at(&dir, "whole", 30);
    let whole = train(&solver, &quiet(), &Cluster::in_process(3).unwrap()).unwrap();
    assert!(dir.join("whole_iter_10.geeps").is_dir() && dir.join("whole_iter_20.solverstate").is_file());
    let state: SolverState =
        caffe_geeps::proto::binary::read(&dir.join("whole_iter_20.solverstate"), "solver state").unwrap();
    assert_eq!(state.iter, Some(20));
    assert!(state.learned_net.unwrap().ends_with("whole_iter_20.caffemodel"));
    assert_eq!(state.history.len(), 8, "one history blob per parameter blob (4 layers, weights and bias)");

    let resumed_solver = solver_at(&dir, "resumed", 30);
    let opts = TrainOptions { resume: Some(dir.join("whole_iter_10.solverstate")), ..quiet() };
    let resumed = train(&resumed_solver, &opts, &Cluster::in_process(3).unwrap()).unwrap();
    assert_eq!(resumed.losses.len(), 20, "resumed at iteration 10");
    assert_eq!(&resumed.losses[..], &whole.losses[10..], "the resumed losses differ");
    assert_eq!(bits(&resumed.final_params), bits(&whole.final_params), "the resumed run ended elsewhere");

    // Into another number of workers: it loads and trains on.
    let other = train(&resumed_solver, &opts, &Cluster::in_process(2).unwrap()).unwrap();
    assert_eq!(other.losses.len(), 20);
    assert!(other.losses.iter().all(|l| l.is_finite()));

    // A snapshot without its checkpoint is refused with the reason.
    std::fs::remove_dir_all(dir.join("whole_iter_20.geeps")).unwrap();
    let opts = TrainOptions { resume: Some(dir.join("whole_iter_20.solverstate")), ..quiet() };
    let err = train(&resumed_solver, &opts, &Cluster::in_process(1).unwrap()).unwrap_err().to_string();
    assert!(err.contains("whole_iter_20.geeps is missing"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ranks (children) of a launcher process.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // The parent pid is the second field after the parenthesised name.
        let Some(after) = stat.rsplit_once(')').map(|(_, a)| a.to_string()) else { continue };
        if after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push(child);
        }
    }
    out
}

fn launch(dir: &Path, prefix: &str, kill_after_snapshot: Option<u64>) -> (Vec<u8>, String) {
    let caffe = PathBuf::from(env!("CARGO_BIN_EXE_caffe-geeps"));
    let launcher = caffe.with_file_name("geeps-launch");
    assert!(launcher.is_file(), "{} is not built: run the workspace's tests", launcher.display());
    let solver = dir.join(format!("{prefix}_solver.prototxt"));
    let extra = format!("snapshot: 10\nsnapshot_prefix: \"{}\"", dir.join(prefix).display());
    std::fs::write(dir.join("net.prototxt"), common::small_net(16)).unwrap();
    std::fs::write(&solver, common::solver("net.prototxt", 60, 4, 20, &extra)).unwrap();
    let mut child = Command::new(&launcher)
        .args(["-n", "4", "--max-restarts", "3", "--"])
        .arg(&caffe)
        .args(["train", "--no-progress", "--solver"])
        .arg(&solver)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    if let Some(iter) = kill_after_snapshot {
        let marker = dir.join(format!("{prefix}_iter_{iter}.geeps")).join("LATEST");
        while !marker.exists() {
            assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "no snapshot at {iter}");
            std::thread::sleep(Duration::from_millis(20));
        }
        let ranks = children_of(child.id());
        assert_eq!(ranks.len(), 4, "the launcher runs 4 ranks");
        let victim = ranks[(std::process::id() as usize) % ranks.len()];
        assert!(Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap().success());
    }
    loop {
        if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the job failed:\n{log}");
    (std::fs::read(dir.join(format!("{prefix}_iter_60.caffemodel"))).unwrap(), log)
}

#[cfg(unix)]
#[test]
fn a_rank_killed_mid_training_restarts_and_ends_with_the_weights_of_a_run_never_killed() {
    let dir = common::scratch("killed-rank");
    let (whole, _) = launch(&dir, "whole", None);
    let (killed, log) = launch(&dir, "killed", Some(20));
    assert!(log.contains("restart"), "the launcher did not restart the ranks:\n{log}");
    assert!(log.contains("Resuming from"), "the ranks did not resume:\n{log}");
    assert!(whole == killed, "the weights after a kill and restart differ from a run never killed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The newest `PREFIX_iter_N.solverstate` in `dir`, and N.
fn newest_solverstate(dir: &Path, prefix: &str) -> Option<(u64, PathBuf)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(&format!("{prefix}_iter_"))?.strip_suffix(".solverstate")?.parse().ok()?;
            Some((n, e.path()))
        })
        .max()
}

/// Ctrl-C to the launcher reaches every rank; they agree on one iteration,
/// snapshot there and stop; resumed from that snapshot, the job ends with
/// the weights of a job never stopped.
#[cfg(unix)]
#[test]
fn ctrl_c_snapshots_every_rank_at_one_iteration_and_the_resumed_job_ends_as_one_never_stopped() {
    let dir = common::scratch("ctrl-c");
    let (whole, _) = launch(&dir, "whole", None);
    let caffe = PathBuf::from(env!("CARGO_BIN_EXE_caffe-geeps"));
    let launcher = caffe.with_file_name("geeps-launch");
    let solver = dir.join("whole_solver.prototxt");
    let text = std::fs::read_to_string(&solver).unwrap().replace("whole", "stopped");
    let solver = dir.join("stopped_solver.prototxt");
    std::fs::write(&solver, text).unwrap();
    let start = |resume: Option<&Path>| {
        let mut c = Command::new(&launcher);
        c.args(["-n", "4", "--"]).arg(&caffe).args(["train", "--no-progress", "--solver"]).arg(&solver);
        if let Some(r) = resume {
            c.arg("-snapshot").arg(r);
        }
        c.current_dir(&dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };
    let child = start(None);
    let marker = dir.join("stopped_iter_10.geeps").join("LATEST");
    let deadline = Instant::now() + Duration::from_secs(300);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "no snapshot at 10");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(log.contains("Optimization stopped early at iteration"), "the ranks did not stop early:\n{log}");
    assert!(!dir.join("stopped_iter_60.caffemodel").exists(), "the job ran to its end:\n{log}");
    let (at, state) = newest_solverstate(&dir, "stopped").expect("a snapshot where the ranks stopped");
    assert!(at > 10 && at < 60, "stopped at {at}:\n{log}");

    let resumed = start(Some(&state)).wait_with_output().unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&resumed.stdout), String::from_utf8_lossy(&resumed.stderr));
    assert!(resumed.status.success(), "the resumed job failed:\n{log}");
    let end = std::fs::read(dir.join("stopped_iter_60.caffemodel"))
        .unwrap_or_else(|e| panic!("no final weights ({e}); the resumed job said:\n{log}"));
    assert!(end == whole, "the job stopped at {at} and resumed ended with other weights");
    let _ = std::fs::remove_dir_all(&dir);
}

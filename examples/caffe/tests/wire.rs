//! `--wire bf16` on the main job: two `caffe-geeps train` processes train
//! the shipped LeNet on the bundled data over loopback, with f32 update
//! deltas and with bf16 (error feedback), and with bf16 both ways
//! (`GEEPS_PUBLISH_WIRE=bf16`: publications as bf16 changes, error feedback
//! at the keeper), and end with the same test accuracy (the whole
//! 2,000-image test set): within a point after 200 iterations, and
//! (ignored, longer) within half a point averaged over three seeds after
//! 1000.
//! The flag is refused for threads of one process, which have no wire.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Trains LeNet (batch 64 per rank) for `iters` iterations on two
/// processes with `--wire wire` and publications as `publish` from `seed`;
/// returns rank 0's final test accuracy over the whole test set.
fn final_accuracy((wire, publish): (&str, &str), iters: u64, seed: u64) -> f32 {
    // Comparisons run side by side, each with its own f32 runs.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = common::scratch(&format!("wire-{wire}-{publish}-{iters}-{seed}-{run}"));
    let solver = format!(
        "net: \"net.prototxt\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"inv\"\n\
         gamma: 0.0001\npower: 0.75\nmax_iter: {iters}\ndisplay: 0\ntest_iter: 20\ntest_interval: 0\n\
         snapshot_after_train: false\nrandom_seed: {seed}\n"
    );
    let path = common::write(&dir, &common::lenet(64), &solver);
    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", common::free_port(), common::free_port());
    let deadline = Instant::now() + Duration::from_secs(60 + iters / 2);
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
                .args(["train", "--no-progress", "--wire", wire, "--solver"])
                .arg(&path)
                .env("GEEPS_RANK", rank.to_string())
                .env("GEEPS_WORLD_SIZE", "2")
                .env("GEEPS_HOSTS", &hosts)
                .env("GEEPS_LISTEN", "127.0.0.1")
                // The flag, not the environment, decides (each rank logs which).
                .env("GEEPS_WIRE", if wire == "bf16" { "f32" } else { "bf16" })
                .env("GEEPS_PUBLISH_WIRE", publish)
                .env("RUST_LOG", "warn,caffe_geeps::cli::cluster=info")
                .env("RAYON_NUM_THREADS", "1")
                .current_dir(&dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let outputs: Vec<(String, String)> =
        ranks.into_iter().enumerate().map(|(r, c)| common::finish(c, deadline, &format!("{wire} rank {r}"))).collect();
    let _ = std::fs::remove_dir_all(&dir);
    for (r, (_, stderr)) in outputs.iter().enumerate() {
        let said = format!("update deltas cross the network as {wire}, publications as {publish}");
        assert!(stderr.contains(&said), "rank {r} did not say `{said}`:\n{stderr}");
    }
    let stdout = &outputs[0].0;
    stdout
        .lines()
        .rev()
        .filter_map(|l| l.split_once("Test net output #0: accuracy = "))
        .find_map(|(_, v)| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no final test accuracy in:\n{stdout}"))
}

/// Mean final test accuracy of the f32 wire and of `bf16` (the update and
/// publication wires) over `seeds`; fails when they are more than `bound`
/// apart.
fn compare(bf16: (&str, &str), iters: u64, seeds: &[u64], bound: f32) {
    let mean = |wires: (&str, &str)| {
        let each: Vec<f32> = seeds.iter().map(|&s| final_accuracy(wires, iters, s)).collect();
        eprintln!("LeNet, 2 processes, {iters} iterations, wires {wires:?}: test accuracy {each:?} (seeds {seeds:?})");
        each.iter().sum::<f32>() / each.len() as f32
    };
    let (f32_acc, bf16_acc) = (mean(("f32", "f32")), mean(bf16));
    // Training must have happened (chance is 0.1) for the comparison to mean anything.
    assert!(f32_acc > 0.6, "f32 runs reached only {f32_acc}");
    assert!(
        (bf16_acc - f32_acc).abs() <= bound,
        "wires {bf16:?}: mean test accuracy {bf16_acc}, f32 wire {f32_acc}: more than {bound} apart"
    );
}

/// 200 iterations, one seed: about 20 s a run on two loaded cores. The two
/// runs measured 0.03 points apart here; the bound is looser (1 point)
/// because later in training a rounding difference grows into run-to-run
/// noise of its own, which other CPUs' float kernels could bring earlier.
#[test]
fn bf16_wire_trains_lenet_as_well_as_f32() {
    compare(("bf16", "f32"), 200, &[3], 0.01);
}

/// The same with publications in bf16 too.
#[test]
fn bf16_both_ways_trains_lenet_as_well_as_f32() {
    compare(("bf16", "bf16"), 200, &[3], 0.01);
}

/// The run of docs/performance.md ("A compressed wire"): 1000 iterations,
/// three seeds each, the means within half a point.
#[test]
#[ignore = "six 1000-iteration trainings, several minutes; run with --ignored"]
fn bf16_wire_trains_lenet_within_half_a_point_of_f32_over_1000_iterations() {
    compare(("bf16", "f32"), 1000, &[1, 2, 3], 0.005);
}

/// The same with publications in bf16 too (docs/performance.md).
#[test]
#[ignore = "six 1000-iteration trainings, several minutes; run with --ignored"]
fn bf16_both_ways_trains_lenet_within_half_a_point_of_f32_over_1000_iterations() {
    compare(("bf16", "bf16"), 1000, &[1, 2, 3], 0.005);
}

#[test]
fn bf16_wire_is_refused_for_threads_of_one_process() {
    let dir = common::scratch("wire-threads");
    let path = common::write(&dir, &common::lenet(8), &common::solver("net.prototxt", 2, 0, 0, ""));
    let out = Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(["train", "--no-progress", "--workers", "2", "--wire", "bf16", "--solver"])
        .arg(&path)
        .env_remove("GEEPS_RANK")
        .env_remove("GEEPS_RENDEZVOUS")
        .current_dir(&dir)
        .output()
        .expect("run caffe-geeps");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--wire bf16 compresses the updates ranks send over the network"), "{stderr}");
    assert!(stderr.contains("drop --wire, or run several processes"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(["train", "--no-progress", "--wire", "fp8", "--solver"])
        .arg(&path)
        .output()
        .expect("run caffe-geeps");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`fp8` is not a wire encoding; write f32"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

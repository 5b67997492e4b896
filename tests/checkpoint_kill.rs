//! A process killed at random instants while checkpointing never leaves a
//! checkpoint that does not load. A `harness = false` target: the program
//! is both the test and, run with `GEEPS_CKPT_CHILD_DIR` set, the child it
//! kills (two workers that add 1 to every row each clock and checkpoint
//! after every clock, until killed).

mod checkpoint_fixture;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use checkpoint_fixture::{build, on_cluster, temp_dir};
use geeps::{keys, InProcessCluster, Slack, Transport};
use rand::Rng;

const KILL_ROWS: u32 = 20_000;
/// The child's checkpoint folder; set, the program is the child.
const CHILD_DIR: &str = "GEEPS_CKPT_CHILD_DIR";

/// The child: checkpoints into `dir` after every clock, from where the
/// last checkpoint there left off, until killed.
fn checkpoint_writer(dir: &Path) {
    let dir = dir.to_path_buf();
    on_cluster(2, move |t| {
        let (ps, w, bias) = build(t, KILL_ROWS);
        let start = match ps.restore(&dir) {
            Ok(r) => r.clock,
            Err(_) => 0,
        };
        for _ in start..u64::MAX {
            for (t, rows) in [(w, KILL_ROWS), (bias, 3)] {
                let mut d = ps.pre_update_keys(&keys(t, 0..rows)).unwrap();
                d.as_mut_slice().unwrap().fill(1.0);
                d.update().unwrap();
            }
            ps.clock().unwrap();
            ps.checkpoint(&dir, &[ps.rank() as u8; 1000]).unwrap();
        }
    });
}

fn a_kill_during_checkpoints_never_leaves_one_that_does_not_load() {
    let dir = temp_dir("kill");
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::thread_rng();
    let mut loaded = 0;
    for round in 0..12 {
        let mut child = std::process::Command::new(&exe)
            .env(CHILD_DIR, &dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..600)));
        child.kill().unwrap();
        child.wait().unwrap();
        if !dir.join("LATEST").exists() {
            continue;
        }
        // Whatever instant the kill hit, the checkpoint found loads and is
        // consistent: every row holds 2 × its clock.
        let t: Arc<dyn Transport> = InProcessCluster::new(1).unwrap().transport(0).unwrap();
        let (ps, w, bias) = build(t, KILL_ROWS);
        let r = ps.restore(&dir).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let want = (2 * r.clock) as f32;
        for (t, rows) in [(w, KILL_ROWS), (bias, 3)] {
            let buf = ps.read_keys(&keys(t, 0..rows), Slack::BSP).unwrap();
            assert!(
                buf.as_slice().unwrap().iter().all(|&v| v == want),
                "round {round}: rows differ from clock {}",
                r.clock
            );
        }
        assert_eq!(r.rank_states, vec![vec![0u8; 1000], vec![1u8; 1000]]);
        ps.shutdown().unwrap();
        loaded += 1;
    }
    assert!(loaded >= 6, "only {loaded} of 12 rounds left a checkpoint; the child may not be running");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn main() -> ExitCode {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        checkpoint_writer(&PathBuf::from(dir));
        return ExitCode::SUCCESS;
    }
    geeps_testkit::harness::run(&[(
        "a_kill_during_checkpoints_never_leaves_one_that_does_not_load",
        a_kill_during_checkpoints_never_leaves_one_that_does_not_load,
    )])
}

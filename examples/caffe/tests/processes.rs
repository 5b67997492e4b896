//! Two `caffe-geeps train` processes on this machine form one cluster over
//! the network transport (rank, world and keeper addresses from GEEPS_*),
//! train the shipped LeNet together and bring the loss down.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn two_processes_train_lenet_together() {
    let dir = common::scratch("processes");
    let solver = "net: \"net.prototxt\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"inv\"\n\
                  gamma: 0.0001\npower: 0.75\nmax_iter: 40\ndisplay: 5\ntest_iter: 4\ntest_interval: 0\n\
                  snapshot_prefix: \"out/lenet\"\nrandom_seed: 3\n";
    let path = common::write(&dir, &common::lenet(32), solver);
    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", common::free_port(), common::free_port());
    let deadline = Instant::now() + Duration::from_secs(120);
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
                .args(["train", "--no-progress", "--solver"])
                .arg(&path)
                .env("GEEPS_RANK", rank.to_string())
                .env("GEEPS_WORLD_SIZE", "2")
                .env("GEEPS_HOSTS", &hosts)
                .env("GEEPS_LISTEN", "127.0.0.1")
                .env("RAYON_NUM_THREADS", "1")
                .current_dir(&dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let outputs: Vec<String> =
        ranks.into_iter().enumerate().map(|(r, c)| common::finish(c, deadline, &format!("rank {r}")).0).collect();

    let losses: Vec<f32> = outputs[0]
        .lines()
        .filter(|l| l.contains("] Iteration") && l.contains(", loss = "))
        .filter_map(|l| l.rsplit("loss = ").next()?.trim().parse().ok())
        .collect();
    assert_eq!(losses.len(), 8, "{}", outputs[0]);
    assert!(losses[7] < 0.75 * losses[0], "loss {losses:?}");
    assert!(outputs[0].contains("on 2 worker(s) x batch 32"), "{}", outputs[0]);
    assert!(outputs[0].contains("Test net output #0: accuracy"), "{}", outputs[0]);
    assert!(outputs[1].contains("rank 1 done"), "{}", outputs[1]);
    assert!(dir.join("out/lenet_iter_40.caffemodel").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

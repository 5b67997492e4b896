//! Caffe's own LeNet (`lenet_solver.prototxt`, `lenet_train_test.prototxt`,
//! paths aside) on LMDBs that `convert_mnist` made from the bundled
//! Fashion-MNIST: it trains exactly as on the IDX files, and (the slow
//! check, run with `--ignored`) the shipped solver's whole schedule reaches
//! a test accuracy of at least 0.85.

mod common;

use std::path::{Path, PathBuf};

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{train, TrainOptions};
use caffe_geeps::tools::convert::convert_mnist;

fn quiet() -> TrainOptions {
    TrainOptions::default()
}

/// Converts the bundled `train` and `t10k` sets into LMDBs under `dir`.
fn lmdbs(dir: &Path) -> (PathBuf, PathBuf) {
    let out = |set: &str| {
        let p = common::data(set);
        let db = dir.join(format!("{set}_lmdb"));
        let (images, labels) = (format!("{p}-images-idx3-ubyte.gz"), format!("{p}-labels-idx1-ubyte.gz"));
        convert_mnist(Path::new(&images), Path::new(&labels), &db).unwrap();
        db
    };
    (out("train"), out("t10k"))
}

/// The shipped LeNet net and solver with their sources pointing at `train`
/// and `test`, snapshots going under `dir`, and `max_iter` when given;
/// returns the solver's path.
fn lenet(dir: &Path, train: &str, test: &str, max_iter: Option<u64>) -> PathBuf {
    let net = std::fs::read_to_string(common::models().join("lenet_train_test.prototxt")).unwrap();
    let net = net
        .replace("\"../../data/train\"", &format!("\"{train}\""))
        .replace("\"../../data/t10k\"", &format!("\"{test}\""));
    assert!(net.contains(train) && net.contains(test));
    std::fs::write(dir.join("lenet_train_test.prototxt"), net).unwrap();
    let solver = std::fs::read_to_string(common::models().join("lenet_solver.prototxt")).unwrap();
    let prefix = dir.join("lenet").display().to_string();
    let mut solver = solver.replace("\"results/caffe/lenet\"", &format!("\"{prefix}\""));
    assert!(solver.contains(&prefix));
    if let Some(n) = max_iter {
        solver = solver.replace("max_iter: 1000", &format!("max_iter: {n}")).replace("snapshot: 500", "snapshot: 0");
    }
    std::fs::write(dir.join("lenet_solver.prototxt"), solver).unwrap();
    dir.join("lenet_solver.prototxt")
}

#[test]
fn lenet_trains_on_an_lmdb_exactly_as_on_the_idx_files() {
    let dir = common::scratch("lmdb-lenet-same");
    let (train_db, test_db) = lmdbs(&dir);
    let on_lmdb =
        SolverParam::load(&lenet(&dir, &train_db.display().to_string(), &test_db.display().to_string(), Some(20)))
            .unwrap();
    let idx_dir = dir.join("idx");
    std::fs::create_dir_all(&idx_dir).unwrap();
    let on_idx = SolverParam::load(&lenet(&idx_dir, &common::data("train"), &common::data("t10k"), Some(20))).unwrap();
    // One worker: with several, the order deltas arrive in changes the last bits.
    let a = train(&on_lmdb, &quiet(), &Cluster::in_process(1).unwrap()).unwrap();
    let b = train(&on_idx, &quiet(), &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(a.losses, b.losses);
    assert_eq!(a.final_params, b.final_params);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "slow: the shipped solver's 1,000 iterations of 4 workers x 64 images, about two minutes in release"]
fn caffe_lenet_on_an_lmdb_reaches_0_85() {
    let dir = common::scratch("lmdb-lenet-accuracy");
    let (train_db, test_db) = lmdbs(&dir);
    let solver =
        SolverParam::load(&lenet(&dir, &train_db.display().to_string(), &test_db.display().to_string(), None)).unwrap();
    let report = train(&solver, &quiet(), &Cluster::in_process(4).unwrap()).unwrap();
    let accuracy = report.test.iter().find(|(n, _)| n == "accuracy").unwrap().1;
    println!(
        "LeNet on the converted LMDB: test accuracy {accuracy} after 1000 iterations, {:.1} s",
        report.wall.as_secs_f64()
    );
    assert!(accuracy >= 0.85, "test accuracy {accuracy}");
    let _ = std::fs::remove_dir_all(&dir);
}

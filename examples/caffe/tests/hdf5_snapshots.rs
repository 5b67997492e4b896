//! `snapshot_format: HDF5`: snapshots are `.caffemodel.h5` and
//! `.solverstate.h5` in Caffe's HDF5 layout with the same weights, bit for
//! bit, as the binary snapshots of the same run; a run resumes from a
//! `.solverstate.h5` as from a `.solverstate`; `-weights` reads a
//! `.caffemodel.h5`; a file that is not one is a clear error. Without the
//! HDF5 library each test says `NOT RUN` and why (a failure with
//! `GEEPS_REQUIRE_HDF5=1`, as in CI).

mod common;

use std::path::Path;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::hdf5::{read_caffemodel_h5, read_solverstate_h5};
use caffe_geeps::proto::caffemodel;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{train, TrainOptions};

fn solver_at(dir: &Path, prefix: &str, hdf5: bool) -> SolverParam {
    let format = if hdf5 { "\nsnapshot_format: HDF5" } else { "" };
    let extra = format!("snapshot: 10\nsnapshot_prefix: \"{}\"{format}", dir.join(prefix).display());
    let path = common::write(dir, &common::small_net(16), &common::solver("net.prototxt", 20, 4, 10, &extra));
    SolverParam::load(&path).unwrap()
}

fn bits(blobs: &[(Vec<usize>, Vec<f32>)]) -> Vec<u32> {
    blobs.iter().flat_map(|(_, v)| v.iter().map(|x| x.to_bits())).collect()
}

#[test]
fn hdf5_snapshots_hold_the_binary_snapshots_weights_and_resume() {
    if !caffe_geeps::hdf5::available_for("hdf5_snapshots_hold_the_binary_snapshots_weights_and_resume") {
        return;
    }
    let dir = common::scratch("hdf5-snapshots");
    let binary =
        train(&solver_at(&dir, "bin", false), &TrainOptions::default(), &Cluster::in_process(2).unwrap()).unwrap();
    let h5 = train(&solver_at(&dir, "h5", true), &TrainOptions::default(), &Cluster::in_process(2).unwrap()).unwrap();
    assert_eq!(binary.losses, h5.losses, "the format changed the training");

    let model = dir.join("h5_iter_10.caffemodel.h5");
    assert!(model.is_file() && !dir.join("h5_iter_10.caffemodel").exists());
    let proto = caffemodel::decode(&std::fs::read(dir.join("bin_iter_10.caffemodel")).unwrap()).unwrap();
    let names: Vec<&str> = proto.iter().map(|l| l.name.as_str()).collect();
    let from_h5 = read_caffemodel_h5(&model, &names).unwrap();
    assert_eq!(from_h5.len(), proto.len(), "a layer is missing from the HDF5 model");
    for (a, b) in from_h5.iter().zip(&proto) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.blobs.iter().map(|b| &b.0).collect::<Vec<_>>(), b.blobs.iter().map(|b| &b.0).collect::<Vec<_>>());
        assert_eq!(bits(&a.blobs), bits(&b.blobs), "layer {}: the HDF5 weights differ", a.name);
    }
    let state = read_solverstate_h5(&dir.join("h5_iter_10.solverstate.h5")).unwrap();
    assert_eq!(state.iter, 10);
    assert!(state.learned_net.ends_with("h5_iter_10.caffemodel.h5"), "{}", state.learned_net);
    assert_eq!(state.history.len(), 8, "one history blob per parameter blob");

    // Resumed from the .solverstate.h5, it ends where the whole run did.
    let opts = TrainOptions { resume: Some(dir.join("h5_iter_10.solverstate.h5")), ..TrainOptions::default() };
    let resumed = train(&solver_at(&dir, "again", true), &opts, &Cluster::in_process(2).unwrap()).unwrap();
    assert_eq!(&resumed.losses[..], &h5.losses[10..], "the resumed losses differ");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn weights_from_an_hdf5_model_and_bad_files() {
    if !caffe_geeps::hdf5::available_for("weights_from_an_hdf5_model_and_bad_files") {
        return;
    }
    let dir = common::scratch("hdf5-weights");
    train(&solver_at(&dir, "w", true), &TrainOptions::default(), &Cluster::in_process(1).unwrap()).unwrap();
    let net = dir.join("net.prototxt");
    let model = dir.join("w_iter_20.caffemodel.h5");
    let out = common::caffe_ok(&[
        "test",
        "--model",
        &net.to_string_lossy(),
        "--weights",
        &model.to_string_lossy(),
        "--iterations",
        "2",
    ]);
    assert!(out.contains("Test net output #0"), "{out}");

    let bad = dir.join("bad.caffemodel.h5");
    std::fs::write(&bad, b"not an hdf5 file").unwrap();
    let out = common::caffe(&[
        "test",
        "--model",
        &net.to_string_lossy(),
        "--weights",
        &bad.to_string_lossy(),
        "--iterations",
        "1",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && text.contains("not an HDF5 file"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

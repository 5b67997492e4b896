//! Training end to end on the bundled data: one BSP worker through geeps
//! matches the same net trained on plain memory; four workers bring the
//! loss down with every call on geeps's fast path; snapshots evaluate with
//! `test --weights` to what training reported; the curve files appear.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::PsOptions;
use caffe_geeps::solvers::solve::{build_nets, test_weights, train, TrainOptions};
use common::{assert_close, quiet, reference};

#[test]
fn one_bsp_worker_matches_training_without_geeps() {
    let dir = common::scratch("bsp-equals-plain");
    let path = common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 8, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let (want, want_losses) = reference(&solver);
    assert!(want_losses.iter().all(|l| l.is_finite()));

    let report = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&report.final_params, &want, "geeps, one table per layer");
    for (i, (a, b)) in report.losses.iter().zip(&want_losses).enumerate() {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "loss at iteration {i}: {a} vs {b}");
    }

    // Shared tables and several mini-batches per clock change where rows
    // live and when they travel, not what one worker computes.
    let ps = PsOptions { layers_per_table: 2, batches_per_clock: 2, ..PsOptions::default() };
    let report = train(&solver, &quiet(ps), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&report.final_params, &want, "geeps, 2 layers per table, 2 batches per clock");

    // A device budget too small to keep everything on the device: rows
    // are swapped through host memory, with the same result.
    let ps = PsOptions { device_memory: 1 << 20, ..PsOptions::default() };
    let report = train(&solver, &quiet(ps), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&report.final_params, &want, "geeps with a 1 MiB device budget");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_net_with_split_blobs_trains_through_geeps_as_on_plain_memory() {
    // pool1 feeds two branches and the label two losses: Split layers copy
    // them, and their gradients meet in the Split's backward.
    let net = format!(
        r#"name: "branches"
layer {{ name: "d" type: "Data" top: "data" top: "label"
  transform_param {{ scale: 0.00390625 }} data_param {{ source: "{src}" batch_size: 8 }} }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 4 kernel_size: 5 stride: 2 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "pool1" top: "ip2"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "ip3" type: "InnerProduct" bottom: "pool1" top: "ip3"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
layer {{ name: "loss3" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss3" loss_weight: 0.5 }}
"#,
        src = common::data("train")
    );
    let dir = common::scratch("split-net");
    let path = common::write(&dir, &net, &common::solver("net.prototxt", 6, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let (built, _) = build_nets(&solver, &DataCache::default()).unwrap();
    let splits: Vec<_> = built.layers.iter().filter(|l| l.type_name == "Split").map(|l| l.name.as_str()).collect();
    assert_eq!(splits, ["label_d_1_split", "pool1_pool1_0_split"]);
    let (want, _) = reference(&solver);
    let report = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert_close(&report.final_params, &want, "geeps with Split layers");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn four_workers_bring_the_loss_down_on_the_fast_path() {
    let dir = common::scratch("four-workers");
    let lenet = common::lenet(32);
    assert!(lenet.contains("batch_size: 32") && !lenet.contains("../../data"));
    let path = common::write(&dir, &lenet, &common::solver("net.prototxt", 60, 20, 0, ""));
    let mut solver = SolverParam::load(&path).unwrap();
    solver.base_lr = 0.01;
    let report = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(4).unwrap()).unwrap();
    let mean = |s: &[f32]| s.iter().sum::<f32>() / s.len() as f32;
    let (first, last) = (mean(&report.losses[..5]), mean(&report.losses[50..]));
    assert!(last < 0.75 * first, "loss {first} -> {last}");
    let accuracy = report.test.iter().find(|(n, _)| n == "accuracy").unwrap().1;
    assert!(accuracy > 0.4, "test accuracy {accuracy}");
    assert_eq!(report.stats.len(), 4);
    for s in &report.stats {
        // Setup and tests use keyed calls; every training call is prefetched.
        assert!(s.prefetch_hits > 10 * s.slow_path_calls, "{s}");
    }
    // Each blob slot is one local access, served in place: no copy of any
    // blob through the pool (a data with a gradient in one access would be).
    for p in &report.plans {
        assert!(p.local_in_place > 0 && p.local_buffered == 0, "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshots_evaluate_as_training_reported() {
    let dir = common::scratch("snapshot");
    let prefix = dir.join("small").display().to_string();
    let extra = format!("snapshot: 5\nsnapshot_prefix: \"{prefix}\"");
    let path = common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 10, 20, 0, &extra));
    let solver = SolverParam::load(&path).unwrap();
    let opts = TrainOptions { curve_prefix: Some(prefix.clone()), verbose: true, ..quiet(PsOptions::default()) };
    let report = train(&solver, &opts, &Cluster::in_process(2).unwrap()).unwrap();
    let names: Vec<_> =
        report.snapshots.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["small_iter_5.caffemodel", "small_iter_10.caffemodel"]);

    let (outputs, batches) = test_weights(
        &dir.join("net.prototxt"),
        &report.snapshots[1],
        None,
        &caffe_geeps::proto::net_state::NetState::phase(caffe_geeps::proto::net::Phase::Test),
    )
    .unwrap();
    assert_eq!(batches, 20);
    for (name, v) in &report.test {
        let got = outputs.iter().find(|(n, _)| n == name).unwrap().1;
        assert!((got - v).abs() < 1e-4, "{name}: test --weights {got}, training {v}");
    }

    let csv = std::fs::read_to_string(report.curve_csv.as_ref().unwrap()).unwrap();
    assert!(csv.starts_with("iteration,seconds,lr,loss,test_accuracy,test_loss"), "{csv}");
    let png = std::fs::read(report.curve_png.as_ref().unwrap()).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // Starting from a snapshot reproduces its test accuracy at iteration 0.
    let warm = SolverParam { max_iter: 1, ..solver.clone() };
    // Into the same snapshot_prefix: told to overwrite the earlier run's snapshots.
    let opts = TrainOptions {
        weights: Some(report.snapshots[1].clone()),
        existing: caffe_geeps::solvers::snapshots::ExistingSnapshots::Overwrite,
        ..quiet(PsOptions::default())
    };
    assert!(train(&warm, &opts, &Cluster::in_process(1).unwrap()).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--gpu 0` keeps the rows in the CUDA device's memory: with one worker the
/// losses and the final weights equal the host device's bit for bit (the
/// layers compute on the CPU either way). Without a driver, the run fails
/// with one error that says what to do, never trains on the host instead.
#[test]
fn gpu_device_trains_bit_for_bit_as_the_host_device() {
    use caffe_geeps::ps::DeviceChoice;
    let dir = common::scratch("gpu-device");
    let path = common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 12, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    // Rows on the GPU, layers on the CPU: the placement alone changes nothing.
    let gpu = PsOptions { device: DeviceChoice::Cuda(vec![0]), layers_on_cpu: true, ..PsOptions::default() };
    let Some(_) = geeps_testkit::Backend::cuda_for("gpu_device_trains_bit_for_bit_as_the_host_device") else {
        let err = train(&solver, &quiet(gpu), &Cluster::in_process(1).unwrap()).unwrap_err().to_string();
        assert!(err.contains("--gpu 0") && err.contains("no usable CUDA device"), "{err}");
        assert!(err.contains("Run without --gpu"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let host = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    let on_gpu = train(&solver, &quiet(gpu.clone()), &Cluster::in_process(1).unwrap()).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&on_gpu.losses), bits(&host.losses), "losses on the GPU and on the host device");
    for (l, (g, h)) in on_gpu.final_params.iter().zip(&host.final_params).enumerate() {
        assert_eq!(bits(g), bits(h), "parameters of layer {l}");
    }
    // Rows swapped through host memory on the GPU too: still the same bits.
    let tight = |device| PsOptions { device_memory: 1 << 20, device, layers_on_cpu: true, ..PsOptions::default() };
    let host = train(&solver, &quiet(tight(DeviceChoice::Host)), &Cluster::in_process(1).unwrap()).unwrap();
    let swapped = train(&solver, &quiet(tight(gpu.device)), &Cluster::in_process(1).unwrap()).unwrap();
    assert!(swapped.stats[0].bytes_host_to_device > 0, "the 1 MiB budget swaps rows: {}", swapped.stats[0]);
    assert_eq!(bits(&swapped.losses), bits(&host.losses), "GPU and host device with a 1 MiB budget");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several test nets (Caffe's TestAll): each is tested in turn with its own
/// test_iter, and their outputs are told apart.
#[test]
fn every_test_net_is_tested_with_its_own_batches() {
    let dir = common::scratch("two-test-nets");
    let solver = common::solver("net.prototxt", 6, 2, 3, "test_iter: 4");
    let path = common::write(&dir, &common::small_net(16), &solver);
    let solver = SolverParam::load(&path).unwrap();
    assert_eq!(solver.test_nets.iter().map(|t| t.iter).collect::<Vec<_>>(), [2, 4]);
    let report = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(2).unwrap()).unwrap();
    let names: Vec<&str> = report.test.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["accuracy", "loss", "net1/accuracy", "net1/loss"]);
    for (n, v) in &report.test {
        assert!(v.is_finite() && (!n.ends_with("accuracy") || (0.0..=1.0).contains(v)), "{n} = {v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! MemoryData: a library caller feeds the layer arrays
//! (`DataCache::feed_memory_data`, Caffe's `MemoryDataLayer::Reset`), which
//! it serves batch by batch in order, wrapping around; a net trains on
//! them, on the CPU and (where a CUDA device is, the emulated driver here)
//! with its layers on the GPU; arrays that do not fit the layer, and a
//! layer never fed (as the command line leaves it), are refused naming what
//! to fix and the call.

mod common;

use std::path::Path;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::net::Net;
use caffe_geeps::proto::net::{NetParam, Phase};
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::{DeviceChoice, PsOptions};
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};

/// A MemoryData layer of batch 2 over 1×2×3 items, and a classifier.
const NET: &str = r#"name: "memory"
layer { name: "feed" type: "MemoryData" top: "data" top: "label"
  memory_data_param { batch_size: 2 channels: 1 height: 2 width: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"#;

/// Six items: item i holds 10·i + k at value k; label i mod 3.
fn arrays() -> (Vec<f32>, Vec<f32>) {
    let data = (0..6).flat_map(|i| (0..6).map(move |k| (10 * i + k) as f32)).collect();
    let labels = (0..6).map(|i| (i % 3) as f32).collect();
    (data, labels)
}

fn build(cache: &DataCache) -> caffe_geeps::Result<Net> {
    let param = NetParam::parse(NET, Path::new("memory.prototxt")).expect("the net parses");
    Net::build(&param, Phase::Train, cache)
}

#[test]
fn batches_are_the_fed_items_in_order_wrapping_around() {
    let cache = DataCache::default();
    let (data, labels) = arrays();
    cache.feed_memory_data("feed", data.clone(), labels.clone()).unwrap();
    let net = build(&cache).unwrap();
    assert_eq!(net.layers[0].type_name, "MemoryData");
    let mut plain = Plain::new(&net, 0, 1).unwrap();
    let tops = net.layers[0].tops.clone();
    // Three batches cover the six items; the fourth starts over.
    for first in [0, 2, 4, 0, 2] {
        plain.forward_one(0, &[], true, 1).unwrap();
        let got = plain.output_values_of(&tops);
        assert_eq!(got[0], data[first * 6..(first + 2) * 6], "batch from item {first}");
        assert_eq!(got[1], labels[first..first + 2], "labels from item {first}");
    }
}

/// `NET` and a 4-iteration SGD solver for it, written to `dir`.
fn four_iterations(dir: &Path) -> SolverParam {
    std::fs::write(dir.join("net.prototxt"), NET).unwrap();
    let solver_text = "net: \"net.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 4\nrandom_seed: 3\n\
                       snapshot_after_train: false\nsolver_mode: CPU\n";
    std::fs::write(dir.join("solver.prototxt"), solver_text).unwrap();
    SolverParam::load(&dir.join("solver.prototxt")).unwrap()
}

/// Training options on `ps` with `arrays()` fed to the layer.
fn fed(ps: PsOptions) -> TrainOptions {
    let opts = common::quiet(ps);
    let (data, labels) = arrays();
    // Centred and scaled: a rate of 0.01 on values up to 55 would overshoot.
    opts.data.feed_memory_data("feed", data.iter().map(|v| (v - 27.5) / 30.0).collect(), labels).unwrap();
    opts
}

#[test]
fn a_net_trains_on_fed_arrays() {
    let dir = common::scratch("memory-data-train");
    let solver = four_iterations(&dir);
    let opts = fed(PsOptions::default());
    let (net, _) = build_nets(&solver, &opts.data).unwrap();
    let initial = ParamLayout::of(&net).initial(&net, 3);
    let report = train(&solver, &opts, &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(report.losses.len(), 4);
    assert!(report.losses.iter().all(|l| l.is_finite() && *l > 0.0), "{:?}", report.losses);
    assert_ne!(report.final_params, initial, "the weights moved");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same fed arrays train the same with the layers on the GPU as on the
/// CPU (the GPU's sums in other orders: losses and weights to rounding).
#[test]
fn fed_arrays_train_on_the_gpu_as_on_the_cpu() {
    if geeps_testkit::Backend::cuda_for("fed_arrays_train_on_the_gpu_as_on_the_cpu").is_none() {
        return;
    }
    let dir = common::scratch("memory-data-gpu");
    let solver = four_iterations(&dir);
    let run = |device| {
        let opts = fed(PsOptions { device, ..PsOptions::default() });
        train(&solver, &opts, &Cluster::in_process(1).unwrap()).unwrap()
    };
    let (cpu, gpu) = (run(DeviceChoice::default()), run(DeviceChoice::Cuda(vec![0])));
    assert_eq!(gpu.losses.len(), 4);
    for (i, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
        assert!((g - c).abs() <= 1e-4 * c.abs().max(1.0), "iteration {i}: GPU loss {g}, CPU loss {c}");
    }
    for (l, (g, c)) in gpu.final_params.iter().zip(&cpu.final_params).enumerate() {
        for (k, (a, b)) in g.iter().zip(c).enumerate() {
            assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "layer {l} parameter {k}: GPU {a}, CPU {b}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn arrays_that_do_not_fit_the_layer_are_refused() {
    let (data, labels) = arrays();
    for (data, labels, words) in [
        (data[..30].to_vec(), labels.clone(), "30 data values for 6 labels"),
        (data[..30].to_vec(), labels[..5].to_vec(), "fed 5 labels; feed a positive multiple of its batch_size 2"),
        (Vec::new(), Vec::new(), "fed 0 labels"),
    ] {
        let cache = DataCache::default();
        cache.feed_memory_data("feed", data, labels).unwrap();
        let err = build(&cache).err().expect("refused").to_string();
        assert!(err.contains(words) && err.contains("`feed`"), "{err}");
    }
}

#[test]
fn a_layer_never_fed_is_refused_at_its_line_naming_the_call() {
    let err = build(&DataCache::default()).err().expect("refused").to_string();
    assert!(err.contains("memory.prototxt:2"), "{err}");
    assert!(err.contains("never fed") && err.contains("DataCache::feed_memory_data"), "{err}");
    // Arrays fed under another name feed nothing.
    let cache = DataCache::default();
    let (data, labels) = arrays();
    cache.feed_memory_data("other", data, labels).unwrap();
    assert!(build(&cache).err().expect("refused").to_string().contains("never fed"));
}

#[test]
fn the_command_line_refuses_a_memory_data_net_at_its_line() {
    let dir = common::scratch("memory-data-cli");
    std::fs::write(dir.join("net.prototxt"), NET).unwrap();
    std::fs::write(
        dir.join("solver.prototxt"),
        "net: \"net.prototxt\"\nbase_lr: 0.01\nlr_policy: \"fixed\"\nmax_iter: 1\nsnapshot_after_train: false\n",
    )
    .unwrap();
    let out = common::caffe(&["train", "-solver", &dir.join("solver.prototxt").to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("net.prototxt:2") && err.contains("DataCache::feed_memory_data"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

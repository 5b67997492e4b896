//! A net that names every layer type a prototxt may use (in place where
//! Caffe's nets run them so, with automatic Splits where a blob feeds two
//! layers) builds in both phases from its prototxt and trains through the
//! normal entry point on the bundled data: finite losses, every learned
//! layer moved, BatchNorm's running statistics gathered. A `mean_file`
//! is found beside the net and checked against the images.

mod common;

use std::collections::BTreeSet;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::datum::encode_mean;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::proto::net::LAYER_TYPES;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};

#[test]
fn a_net_of_every_layer_type_builds_and_trains() {
    let dir = common::scratch("every-layer-type");
    let path = common::write(&dir, &common::every_type_net(), &common::solver("net.prototxt", 4, 2, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let (net, test) = build_nets(&solver, &DataCache::default()).unwrap();
    let test = test.into_iter().next().expect("a TEST net");
    let types: BTreeSet<&str> = net.layers.iter().chain(&test.layers).map(|l| l.type_name).collect();
    let mut want: BTreeSet<&str> = LAYER_TYPES.into_iter().collect();
    want.insert("Split");
    // The other sources of a net (image files, fillers, fed arrays) have their
    // own suites (tests/data_layers.rs, tests/memory_data.rs), and so do the CPU-only layers (tests/cpu_only_layers.rs,
    // tests/standard_nets.rs).
    for other in cpu_only_and_data_types() {
        want.remove(other);
    }
    assert_eq!(types, want);
    let in_place: Vec<&str> = net.layers.iter().filter(|l| l.in_place).map(|l| l.name.as_str()).collect();
    assert_eq!(in_place, ["bn1", "scale1", "prelu1", "relu", "tanh", "sig", "drop"]);
    // conv1's last version feeds two convolutions, pool feeds Power and Concat.
    let splits: Vec<&str> = net.layers.iter().filter(|l| l.type_name == "Split").map(|l| l.name.as_str()).collect();
    assert_eq!(splits, ["conv1_prelu1_0_split", "pool_pool_0_split"]);
    let shape = |name: &str| net.blobs[net.blob(name).unwrap()].shape.clone();
    assert_eq!(shape("conv1"), [8, 8, 24, 24], "dilation 2 with pad 2 keeps the size");
    assert_eq!(shape("cat"), [8, 16, 12, 12]);
    assert_eq!(shape("scores"), [8, 10]);

    let layout = ParamLayout::of(&net);
    let initial = layout.initial(&net, solver.random_seed.unwrap());
    let opts = TrainOptions::default();
    let report = train(&solver, &opts, &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(report.losses.len(), 4);
    assert!(report.losses.iter().all(|l| l.is_finite()), "{:?}", report.losses);
    let accuracy = report.test.iter().find(|(n, _)| n == "accuracy").expect("the test reports accuracy").1;
    assert!((0.0..=1.0).contains(&accuracy), "{accuracy}");
    for (lp, (end, start)) in layout.layers.iter().zip(report.final_params.iter().zip(&initial)) {
        let name = &net.layers[lp.layer].name;
        assert!(end.iter().all(|v| v.is_finite()), "`{name}` has non-finite parameters");
        assert!(end != start, "`{name}`'s parameters did not change");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mean_file_is_found_beside_the_net_and_checked_against_the_images() {
    let dir = common::scratch("mean-file");
    let net = |mean_file: &str| {
        common::small_net(4).replace(
            "transform_param { scale: 0.00390625 }",
            &format!("transform_param {{ scale: 0.00390625 mean_file: \"{mean_file}\" }}"),
        )
    };
    let build = |mean_file: &str| {
        let path = common::write(&dir, &net(mean_file), &common::solver("net.prototxt", 1, 0, 0, ""));
        build_nets(&SolverParam::load(&path).unwrap(), &DataCache::default()).map(|_| ())
    };
    // The bundled images are 1x28x28; a relative name resolves beside the net.
    std::fs::write(dir.join("mean.binaryproto"), encode_mean(1, 28, 28, &[33.0; 28 * 28])).unwrap();
    build("mean.binaryproto").unwrap();

    let e = build("missing.binaryproto").unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:2: layer `d`", dir.join("net.prototxt").display())), "{e}");
    assert!(e.contains("missing.binaryproto") && e.contains("cannot read the mean_file"), "{e}");

    std::fs::write(dir.join("small.binaryproto"), encode_mean(3, 8, 8, &[0.0; 3 * 64])).unwrap();
    let e = build("small.binaryproto").unwrap_err().to_string();
    assert!(e.contains(":2: layer `d`") && e.contains("the mean image is 3x8x8 but the images are 1x28x28"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The types tests/data_layers.rs, tests/hdf5_data.rs and tests/cpu_only_layers.rs train instead.
fn cpu_only_and_data_types() -> [&'static str; 28] {
    [
        "ImageData",
        "HDF5Data",
        "MemoryData",
        "DummyData",
        "AbsVal",
        "BNLL",
        "Exp",
        "Log",
        "Threshold",
        "ELU",
        "Silence",
        "EuclideanLoss",
        "SigmoidCrossEntropyLoss",
        // tests/standard_nets.rs
        "Slice",
        "Crop",
        "Deconvolution",
        "Bias",
        "Tile",
        "Reduction",
        "ArgMax",
        "Embed",
        "MVN",
        "SPP",
        "Parameter",
        "ContrastiveLoss",
        "HingeLoss",
        "MultinomialLogisticLoss",
        "InfogainLoss",
    ]
}

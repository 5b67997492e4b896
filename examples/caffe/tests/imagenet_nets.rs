//! Caffe's published ImageNet nets (AlexNet, CaffeNet, GoogLeNet), as
//! shipped in `models/imagenet`, read with the layers Caffe lists and train
//! through the normal entry point: only the data paths and the batch sizes
//! are rewritten, the data is a small LMDB of random 3×256×256 images (with
//! its mean image from `compute_image_mean` where the net names a
//! `mean_file`), and three iterations of one worker give a finite loss each
//! and move every parameter layer.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::datum::{Image, Values};
use caffe_geeps::data::lmdb::LmdbWriter;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::proto::net::{LayerKind, NetParam, Phase};
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};
use caffe_geeps::tools::mean::compute_image_mean;

const NETS: [&str; 3] = ["alexnet_train_val", "caffenet_train_val", "googlenet_train_val"];

fn shipped(name: &str) -> PathBuf {
    common::models().join("imagenet").join(format!("{name}.prototxt"))
}

/// `records` random 3×256×256 byte images with labels below 1000, as Caffe's
/// `convert_imageset` lays them out.
fn random_lmdb(path: &Path, records: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut db = LmdbWriter::create(path).unwrap();
    for i in 0..records {
        let bytes: Vec<u8> = (0..3 * 256 * 256).map(|_| rng.gen()).collect();
        let img =
            Image { channels: 3, height: 256, width: 256, values: Values::Bytes(bytes), label: rng.gen_range(0..1000) };
        db.put(format!("{i:08}_random").as_bytes(), &img.to_datum_bytes()).unwrap();
    }
    assert_eq!(db.finish().unwrap(), records);
}

/// Replaces the value of every `field: ...` line, in order, with `values`
/// (one per occurrence; the file must have exactly that many).
fn rewrite(src: &str, field: &str, values: &[String]) -> String {
    let key = format!("{field}:");
    let mut left = values.iter();
    let out: Vec<String> = src
        .lines()
        .map(|line| match line.trim_start().strip_prefix(&key) {
            Some(_) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}{key} {}", left.next().unwrap_or_else(|| panic!("more `{field}` lines than values")))
            }
            None => line.to_string(),
        })
        .collect();
    assert!(left.next().is_none(), "fewer `{field}` lines than values");
    out.join("\n") + "\n"
}

/// The shipped net `name` on random LMDBs under `dir`, with batches of 2
/// (TRAIN) and 1 (TEST), and a solver for three iterations and one test
/// batch at the end; returns the solver's path.
fn prepare(dir: &Path, name: &str) -> PathBuf {
    let (train_db, test_db) = (dir.join("train_lmdb"), dir.join("val_lmdb"));
    random_lmdb(&train_db, 4, 1);
    random_lmdb(&test_db, 2, 2);
    let quote = |p: &Path| format!("\"{}\"", p.display());
    let mut net = std::fs::read_to_string(shipped(name)).unwrap();
    net = rewrite(&net, "source", &[quote(&train_db), quote(&test_db)]);
    net = rewrite(&net, "batch_size", &["2".into(), "1".into()]);
    if net.contains("mean_file:") {
        let mean = dir.join("mean.binaryproto");
        compute_image_mean(&train_db, &mean).unwrap();
        net = rewrite(&net, "mean_file", &[quote(&mean), quote(&mean)]);
    }
    std::fs::write(dir.join("net.prototxt"), net).unwrap();
    // Caffe's published solvers' settings, for three iterations.
    let solver = "net: \"net.prototxt\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n\
                  lr_policy: \"step\"\ngamma: 0.1\nstepsize: 100000\nmax_iter: 3\ndisplay: 0\n\
                  test_iter: 1\ntest_interval: 0\nrandom_seed: 5\nsnapshot_after_train: false\n";
    std::fs::write(dir.join("solver.prototxt"), solver).unwrap();
    dir.join("solver.prototxt")
}

/// Held while an AlexNet-sized net (61M parameters) trains: each holds
/// about 3 GB (the parameters in geeps's tables, the worker's copy, the
/// gradients, the solver's history), and two at once on two cores would
/// double the memory without finishing sooner.
static LARGE: Mutex<()> = Mutex::new(());

fn trains_three_iterations(name: &str) {
    let _large =
        if name == "googlenet_train_val" { None } else { Some(LARGE.lock().unwrap_or_else(|e| e.into_inner())) };
    let dir = common::scratch(&format!("imagenet-{name}"));
    let solver = SolverParam::load(&prepare(&dir, name)).unwrap();
    let (net, test) = build_nets(&solver, &DataCache::default()).unwrap();
    assert_eq!(test.len(), 1, "the TEST net builds too");
    let layout = ParamLayout::of(&net);
    let initial = layout.initial(&net, solver.random_seed.unwrap());
    let opts = TrainOptions::default();
    let report = train(&solver, &opts, &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(report.losses.len(), 3, "{name}: one loss per iteration");
    assert!(report.losses.iter().all(|l| l.is_finite() && *l > 0.0), "{name}: losses {:?}", report.losses);
    assert!(report.test.iter().all(|(_, v)| v.is_finite()), "{name}: test outputs {:?}", report.test);
    assert_eq!(report.final_params.len(), initial.len());
    for (lp, (end, start)) in layout.layers.iter().zip(report.final_params.iter().zip(&initial)) {
        let layer = &net.layers[lp.layer].name;
        assert!(end.iter().all(|v| v.is_finite()), "{name}: layer `{layer}` has non-finite weights");
        assert!(end != start, "{name}: layer `{layer}`'s weights did not change");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn alexnet_trains() {
    trains_three_iterations("alexnet_train_val");
}

#[test]
fn caffenet_trains() {
    trains_three_iterations("caffenet_train_val");
}

#[test]
fn googlenet_trains() {
    trains_three_iterations("googlenet_train_val");
}

/// Layer types per phase, counted.
fn census(net: &NetParam, phase: Phase) -> BTreeMap<&'static str, usize> {
    let mut n = BTreeMap::new();
    for l in net.layers.iter().filter(|l| l.phases.admits(phase)) {
        *n.entry(l.kind.type_name()).or_insert(0) += 1;
    }
    n
}

#[test]
fn the_nets_read_as_published() {
    let load = |name: &str| NetParam::load(&shipped(name)).unwrap();
    let count = |pairs: &[(&'static str, usize)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
    let alexnet = load(NETS[0]);
    assert_eq!(alexnet.name, "AlexNet");
    let alexnet_train = count(&[
        ("Data", 1),
        ("Convolution", 5),
        ("ReLU", 7),
        ("LRN", 2),
        ("Pooling", 3),
        ("InnerProduct", 3),
        ("Dropout", 2),
        ("SoftmaxWithLoss", 1),
    ]);
    assert_eq!(census(&alexnet, Phase::Train), alexnet_train);
    let mut alexnet_test = alexnet_train.clone();
    alexnet_test.insert("Accuracy", 1);
    assert_eq!(census(&alexnet, Phase::Test), alexnet_test);
    // The two-tower convolutions: group 2 on conv2, conv4 and conv5.
    let groups: Vec<(String, usize)> = alexnet
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Convolution(c) => Some((l.name.clone(), c.group)),
            _ => None,
        })
        .collect();
    let want: Vec<(String, usize)> =
        [("conv1", 1), ("conv2", 2), ("conv3", 1), ("conv4", 2), ("conv5", 2)].map(|(n, g)| (n.into(), g)).into();
    assert_eq!(groups, want);

    // CaffeNet: AlexNet with pooling before normalisation, same layer census.
    let caffenet = load(NETS[1]);
    assert_eq!(caffenet.name, "CaffeNet");
    assert_eq!(census(&caffenet, Phase::Test), alexnet_test);
    let order = |n: &NetParam| -> Vec<&'static str> {
        n.layers.iter().map(|l| l.kind.type_name()).filter(|t| *t == "LRN" || *t == "Pooling").take(2).collect()
    };
    assert_eq!(order(&alexnet), ["LRN", "Pooling"]);
    assert_eq!(order(&caffenet), ["Pooling", "LRN"]);

    // GoogLeNet: nine inception modules (a Concat each), two auxiliary
    // classifiers beside the main one (three losses, 0.3 + 0.3 + 1), two LRNs.
    let googlenet = load(NETS[2]);
    assert_eq!(googlenet.name, "GoogleNet");
    let g_train = census(&googlenet, Phase::Train);
    assert_eq!(g_train["Concat"], 9);
    assert_eq!(g_train["LRN"], 2);
    assert_eq!(g_train["SoftmaxWithLoss"], 3);
    assert_eq!(g_train["Convolution"], 57 + 2, "57 in the trunk and inceptions, one per auxiliary head");
    assert_eq!(g_train["InnerProduct"], 5);
    assert_eq!(census(&googlenet, Phase::Test)["Accuracy"], 6, "top-1 and top-5 per head");
    let mut weights: Vec<f32> = googlenet
        .layers
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::SoftmaxWithLoss { .. }))
        .map(|l| l.loss_weight.first().copied().unwrap_or(1.0))
        .collect();
    weights.sort_by(f32::total_cmp);
    assert_eq!(weights, [0.3, 0.3, 1.0]);
    let top5 = googlenet.layers.iter().filter(|l| matches!(l.kind, LayerKind::Accuracy { top_k: 5 })).count();
    assert_eq!(top5, 3);
}

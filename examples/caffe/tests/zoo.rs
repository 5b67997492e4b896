//! The public model zoo (`models/zoo/`, each file as its repository
//! publishes it, see the SOURCES.md beside it) runs: each train file
//! trains three iterations of one worker at a small batch on random data
//! of the size it was published for (only sources, mean files, batch sizes
//! and the solver's schedule rewritten, `common::substitute`), with finite
//! losses and every parameter layer moved; `time` runs on the deploy
//! files, those published at a large batch (GoogLeNet's 10) at a small one
//! (`common::substitute::deploy_at_batch`). The deploy-only nets also
//! train three iterations as a user trains a deploy file, from stand-in
//! weights (`common::deploy_to_train`). Each net runs in seconds in
//! release but VGG-16's training (about 30 s and 8 GB); `scripts/zoo-check`
//! runs this whole file one test at a time.

mod common;

use std::path::{Path, PathBuf};

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};
use common::deploy_to_train;
use common::substitute::{self, Images, CIFAR10, IMAGENET, MNIST, MNIST_PAIRS};

fn zoo(file: &str) -> PathBuf {
    common::models().join("zoo").join(file)
}

/// Trains `net` (a zoo file) three iterations at `batch` on random
/// `images`, with the zoo's `solver` file when it has one; the final weights.
fn trains(net: &str, solver: Option<&str>, images: Images, batch: usize) -> Vec<Vec<f32>> {
    let read = |f: &str| std::fs::read_to_string(zoo(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    // Tests run side by side and may train one file each: a directory per call.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = common::scratch(&format!("zoo-{}-{call}", net.replace('/', "-")));
    let solver_text = solver.map(read);
    let path = substitute::prepare(&read(net), solver_text.as_deref(), &dir, images, batch, 3);
    let weights = trains_solver(net, &path, None, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    weights
}

/// Trains `deploy` (a zoo deploy file) three iterations at `batch` as a
/// user trains a deploy file (`common::deploy_to_train`), on random images
/// of its input's size with labels below `classes`.
fn trains_deploy(deploy: &str, classes: i32, batch: usize) {
    let text = std::fs::read_to_string(zoo(deploy)).unwrap_or_else(|e| panic!("{deploy}: {e}"));
    let dir = common::scratch(&format!("zoo-train-{}", deploy.replace('/', "-")));
    let started = std::time::Instant::now();
    let path = deploy_to_train::prepare(&text, &dir, classes, batch, 3);
    let stand_in = deploy_to_train::stand_in_weights(&dir, 5);
    let frozen = deploy_to_train::frozen_statistics(&text);
    let what = format!("{deploy} (batch {batch}; stand-in weights in {:.1} s)", started.elapsed().as_secs_f64());
    let _ = trains_solver(&what, &path, Some(stand_in), &frozen);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Trains the solver at `path` with one worker, from its fillers or from
/// `stand_in` weights (a `.caffemodel` and its values): finite losses and
/// weights, every learning layer but the `frozen` ones moved; the final weights.
fn trains_solver(
    net: &str,
    path: &Path,
    stand_in: Option<(PathBuf, Vec<Vec<f32>>)>,
    frozen: &[String],
) -> Vec<Vec<f32>> {
    let started = std::time::Instant::now();
    let solver = SolverParam::load(path).unwrap_or_else(|e| panic!("{net}: {e}"));
    let (built, _) = build_nets(&solver, &DataCache::default()).unwrap_or_else(|e| panic!("{net}: {e}"));
    let layout = ParamLayout::of(&built);
    // The memory budget fitted to the net, as the command line does.
    let mut options = TrainOptions::default();
    options.ps.budget_from_net = true;
    let initial = match stand_in {
        Some((file, weights)) => {
            options.weights = Some(file);
            weights
        }
        None => layout.initial(&built, solver.random_seed.unwrap()),
    };
    let report = train(&solver, &options, &Cluster::in_process(1).unwrap()).unwrap_or_else(|e| panic!("{net}: {e}"));
    assert_eq!(report.losses.len(), 3, "{net}: one loss per iteration");
    assert!(report.losses.iter().all(|l| l.is_finite()), "{net}: losses {:?}", report.losses);
    assert!(
        report.test.iter().all(|(_, v)| v.is_finite()),
        "{net}: test outputs {:?} after losses {:?}",
        report.test,
        report.losses
    );
    for (lp, (end, start)) in layout.layers.iter().zip(report.final_params.iter().zip(&initial)) {
        assert!(end.iter().all(|v| v.is_finite()), "{net}: layer `{}` has non-finite weights", lp.name);
        let learns = lp.blobs.iter().any(|b| b.spec.lr_mult != 0.0) && !frozen.contains(&lp.name);
        assert!(!learns || end != start, "{net}: layer `{}`'s weights did not change", lp.name);
    }
    println!(
        "{net}: losses {:?} in {:.1} s ({:.1} s in all)",
        report.losses,
        report.wall.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    report.final_params
}

/// `caffe-geeps time` on a zoo deploy file, one iteration: every layer timed.
fn times(deploy: &str) {
    time_model(deploy, &zoo(deploy));
}

/// [`times`] at `batch`: the deploy file's first input batch rewritten
/// (`common::substitute::deploy_at_batch`), nothing else.
fn times_at(deploy: &str, batch: usize) {
    let text = std::fs::read_to_string(zoo(deploy)).unwrap_or_else(|e| panic!("{deploy}: {e}"));
    let dir = common::scratch(&format!("zoo-time-{}", deploy.replace('/', "-")));
    let model = dir.join("deploy.prototxt");
    std::fs::write(&model, substitute::deploy_at_batch(&text, batch)).expect("write the deploy file");
    time_model(&format!("{deploy} (batch {batch})"), &model);
    let _ = std::fs::remove_dir_all(&dir);
}

fn time_model(what: &str, model: &std::path::Path) {
    let started = std::time::Instant::now();
    let out = common::caffe_ok(&["time", "-model", &model.to_string_lossy(), "-iterations", "1"]);
    assert!(out.contains("*** Benchmark ends ***"), "{what}: {out}");
    let average = out.lines().find(|l| l.starts_with("Average Forward-Backward:")).unwrap_or_default();
    println!("{what}: {average} ({:.1} s in all)", started.elapsed().as_secs_f64());
}

#[test]
fn cifar10_quick_trains() {
    let _ =
        trains("cifar10/cifar10_quick_train_test.prototxt", Some("cifar10/cifar10_quick_solver.prototxt"), CIFAR10, 4);
}

#[test]
fn cifar10_full_trains() {
    let _ = trains("cifar10/cifar10_full_train_test.prototxt", None, CIFAR10, 4);
}

#[test]
fn mnist_autoencoder_trains() {
    let _ = trains(
        "mnist_autoencoder/mnist_autoencoder.prototxt",
        Some("mnist_autoencoder/mnist_autoencoder_solver.prototxt"),
        MNIST,
        4,
    );
}

#[test]
fn mnist_siamese_trains_with_shared_weights() {
    let _ = trains(
        "mnist_siamese/mnist_siamese_train_test.prototxt",
        Some("mnist_siamese/mnist_siamese_solver.prototxt"),
        MNIST_PAIRS,
        4,
    );
}

#[test]
fn squeezenet_trains() {
    let _ = trains("squeezenet_v1.1/train_val.prototxt", None, IMAGENET, 2);
}

/// BVLC's V1-format files (`bvlc_v1/`, upgraded on load) train exactly
/// as the current-format files of the same nets: the same weights, bit for
/// bit, after three iterations from the same seed on the same data.
#[test]
fn bvlc_v1_nets_train_as_their_current_format_files() {
    let siamese_solver = Some("mnist_siamese/mnist_siamese_solver.prototxt");
    for (v1, current, solver, images) in [
        ("cifar10_quick_train_test.prototxt", "cifar10", Some("cifar10/cifar10_quick_solver.prototxt"), CIFAR10),
        ("cifar10_full_train_test.prototxt", "cifar10", None, CIFAR10),
        ("mnist_siamese_train_test.prototxt", "mnist_siamese", siamese_solver, MNIST_PAIRS),
    ] {
        let upgraded = trains(&format!("bvlc_v1/{v1}"), solver, images, 4);
        let published = trains(&format!("{current}/{v1}"), solver, images, 4);
        let bits =
            |w: &[Vec<f32>]| -> Vec<Vec<u32>> { w.iter().map(|l| l.iter().map(|v| v.to_bits()).collect()).collect() };
        assert_eq!(bits(&upgraded), bits(&published), "{v1}: the V1 file's weights differ from the current file's");
    }
}

/// BVLC's CIFAR-10 full solver (HDF5 snapshots, a fixed rate) runs as
/// published but for the schedule and paths, with the V1 net it was
/// published beside and with the current-format net, to the same weights.
#[test]
fn cifar10_full_solver_trains_the_v1_and_current_nets() {
    if !caffe_geeps::hdf5::available_for("cifar10_full_solver_trains_the_v1_and_current_nets") {
        return;
    }
    let solver = Some("cifar10/cifar10_full_solver.prototxt");
    let upgraded = trains("bvlc_v1/cifar10_full_train_test.prototxt", solver, CIFAR10, 4);
    let published = trains("cifar10/cifar10_full_train_test.prototxt", solver, CIFAR10, 4);
    assert_eq!(upgraded, published);
}

#[test]
fn resnet50_deploy_file_trains() {
    // The index's copy of ResNet-50 has a three-class head (`fc3`).
    trains_deploy("resnet_50/ResNet-50-deploy.prototxt", 3, 1);
}

#[test]
fn resnet101_deploy_file_trains() {
    trains_deploy("resnet_101/ResNet-101-deploy.prototxt", 1000, 1);
}

#[test]
fn mobilenet_v1_deploy_file_trains() {
    trains_deploy("mobilenet/mobilenet_deploy.prototxt", 1000, 2);
}

#[test]
fn mobilenet_v2_deploy_file_trains() {
    trains_deploy("mobilenet/mobilenet_v2_deploy.prototxt", 1000, 2);
}

#[test]
fn densenet121_deploy_file_trains() {
    trains_deploy("densenet_121/DenseNet_121.prototxt", 1000, 1);
}

#[test]
fn googlenet_deploy_file_trains() {
    trains_deploy("bvlc_googlenet/deploy.prototxt", 1000, 2);
}

#[test]
fn alexnet_deploy_file_trains() {
    trains_deploy("bvlc_alexnet/deploy.prototxt", 1000, 2);
}

#[test]
fn vgg16_deploy_file_times() {
    times_at("vgg16/deploy.prototxt", 1);
}

// VGG-16's 138M parameters: about 27 s and 8 GB at batch 1 in release on
// the 2-core development machine.
#[test]
fn vgg16_deploy_file_trains() {
    trains_deploy("vgg16/deploy.prototxt", 1000, 1);
}

#[test]
fn lenet_and_alexnet_deploy_files_time() {
    times("lenet/lenet.prototxt");
    times("bvlc_alexnet/deploy.prototxt");
}

#[test]
fn googlenet_deploy_file_times() {
    times_at("bvlc_googlenet/deploy.prototxt", 2);
}

#[test]
fn resnet50_and_resnet101_deploy_files_time() {
    times_at("resnet_50/ResNet-50-deploy.prototxt", 1);
    times_at("resnet_101/ResNet-101-deploy.prototxt", 1);
}

#[test]
fn mobilenet_v1_and_v2_deploy_files_time() {
    times_at("mobilenet/mobilenet_deploy.prototxt", 2);
    times_at("mobilenet/mobilenet_v2_deploy.prototxt", 2);
}

#[test]
fn densenet121_deploy_file_times() {
    times_at("densenet_121/DenseNet_121.prototxt", 1);
}

/// Only the first input's batch changes, in the legacy `input_dim` and
/// `input_shape` forms both; the rest of the file (its last newline or
/// its lack of one included) stays as published.
#[test]
fn deploy_batch_substitution_rewrites_only_the_first_input_batch() {
    for (file, published, rewritten) in [
        ("resnet_50/ResNet-50-deploy.prototxt", "input_dim: 1", "input_dim: 2"),
        ("bvlc_googlenet/deploy.prototxt", "  dim: 10", "  dim: 2"),
        ("mobilenet/mobilenet_v2_deploy.prototxt", "input_dim: 1", "input_dim: 2"),
    ] {
        let text = std::fs::read_to_string(zoo(file)).unwrap();
        let out = substitute::deploy_at_batch(&text, 2);
        let changed: Vec<_> = text.lines().zip(out.lines()).filter(|(a, b)| a != b).collect();
        assert_eq!(changed, [(published, rewritten)], "{file}");
        assert_eq!(out.len(), text.len() - published.len() + rewritten.len(), "{file}: nothing else changed");
    }
}

/// A deploy file turned into a train net keeps every line but its input
/// declaration, in order; gains one Data layer over `label` and the input
/// blob; and puts the loss on the logits (a final Softmax's bottom).
#[test]
fn deploy_to_train_replaces_only_the_input_and_adds_a_loss_on_the_logits() {
    let dir = common::scratch("zoo-deploy-to-train");
    for (file, input_lines, logits) in [
        ("resnet_50/ResNet-50-deploy.prototxt", 5, "fc3"),
        ("densenet_121/DenseNet_121.prototxt", 5, "fc6"),
        ("mobilenet/mobilenet_v2_deploy.prototxt", 5, "fc7"),
        ("bvlc_googlenet/deploy.prototxt", 7, "loss3/classifier"),
        ("bvlc_alexnet/deploy.prototxt", 6, "fc8"),
        ("vgg16/deploy.prototxt", 5, "fc8"),
    ] {
        let text = std::fs::read_to_string(zoo(file)).unwrap();
        let _ = std::fs::remove_dir_all(dir.join("random_lmdb"));
        let out = deploy_to_train::train_net(&text, &dir, 10, 2);
        // The added layers taken out, the rest is the file less its input lines.
        let key = if text.contains("\nlayers {") { "layers" } else { "layer" };
        let data_at = out.find(&format!("{key} {{\n  name: \"data\"\n  type: ")).expect("a Data layer");
        let data_end = data_at + out[data_at..].find("\n}\n").unwrap() + 3;
        let loss_at = out.rfind(&format!("{key} {{\n  name: \"loss\"")).expect("a loss layer");
        let (data, loss) = (&out[data_at..data_end], &out[loss_at..]);
        let rest = format!("{}{}", &out[..data_at], &out[data_end..loss_at]);
        let mut kept = rest.lines().peekable();
        let removed: Vec<&str> = text.lines().filter(|l| kept.next_if(|k| k == l).is_none()).collect();
        assert_eq!(kept.next(), None, "{file}: a line was added");
        assert_eq!(removed.len(), input_lines, "{file}: removed {removed:?}");
        assert!(removed.iter().any(|l| l.contains("input")), "{file}: removed {removed:?}");
        let (data_type, loss_type) =
            if key == "layers" { ("DATA", "SOFTMAX_LOSS") } else { ("\"Data\"", "\"SoftmaxWithLoss\"") };
        assert!(data.contains(&format!("  type: {data_type}\n  top: \"data\"\n  top: \"label\"\n")), "{file}: {data}");
        assert!(loss.contains(&format!("  type: {loss_type}\n")), "{file}: {loss}");
        assert!(loss.contains(&format!("bottom: \"{logits}\"\n  bottom: \"label\"\n  top: \"loss\"")), "{file}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every zoo file the tests name is there, as its SOURCES.md lists it.
#[test]
fn every_zoo_file_is_listed_in_its_sources() {
    let root = common::models().join("zoo");
    for dir in std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let sources = std::fs::read_to_string(dir.join("SOURCES.md"))
            .unwrap_or_else(|_| panic!("{} has no SOURCES.md", dir.display()));
        for f in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()) {
            if f.ends_with(".prototxt") {
                assert!(sources.contains(&format!("`{f}`")), "{}: `{f}` is not in SOURCES.md", dir.display());
            }
        }
    }
}

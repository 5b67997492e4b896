//! What a run says when the net or the weights do not fit: a net too big for
//! memory is refused before anything is allocated, naming its biggest
//! layers; a loss that turns NaN stops the run naming the iteration and the
//! layer; `--weights` from a file missing a layer fine-tunes, the missing
//! layer starting from its filler.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::solvers::solve::{build_nets, train, TrainOptions};

fn quiet() -> TrainOptions {
    TrainOptions::default()
}

#[test]
fn a_net_too_big_for_memory_is_refused_up_front_with_its_biggest_layers() {
    let dir = common::scratch("too-big");
    let net = common::small_net(16).replace("num_output: 32 ", "num_output: 2000000000 ");
    let path = common::write(&dir, &net, &common::solver("net.prototxt", 2, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let err = train(&solver, &quiet(), &Cluster::in_process(1).unwrap()).unwrap_err().to_string();
    assert!(err.contains("needs about") && err.contains("available"), "{err}");
    assert!(err.contains("layer `ip1` (InnerProduct, line"), "the biggest layer is named first: {err}");

    // The estimate itself, against a small limit.
    let solver =
        SolverParam::load(&common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 2, 0, 0, "")))
            .unwrap();
    let (net, _) = build_nets(&solver, &DataCache::default()).unwrap();
    assert!(caffe_geeps::net::memory::check_fits(&net, 1, Some(1 << 40)).is_ok());
    let err = caffe_geeps::net::memory::check_fits(&net, 4, Some(1000)).unwrap_err().to_string();
    assert!(err.contains("for 4 worker(s)"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_diverging_loss_stops_the_run_naming_the_iteration_and_layer() {
    let dir = common::scratch("nan");
    let solver = common::solver("net.prototxt", 50, 0, 0, "").replace("base_lr: 0.05", "base_lr: 1e30");
    let path = common::write(&dir, &common::small_net(16), &solver);
    let solver = SolverParam::load(&path).unwrap();
    let err = train(&solver, &quiet(), &Cluster::in_process(1).unwrap()).unwrap_err().to_string();
    // SoftmaxWithLoss clamps its log as Caffe does, so the first thing to
    // turn NaN is a parameter update.
    assert!(err.contains("training diverged") && err.contains("at iteration"), "{err}");
    assert!(err.contains("the update of layer `") && (err.contains("is NaN") || err.contains("is inf")), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fine_tuning_initialises_layers_the_weights_lack_from_their_fillers() {
    let dir = common::scratch("fine-tune");
    let extra = format!("snapshot_prefix: \"{}\"", dir.join("base").display());
    let path = common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 5, 0, 0, &extra));
    let solver = SolverParam::load(&path).unwrap();
    let base = train(&solver, &quiet(), &Cluster::in_process(1).unwrap()).unwrap();
    let weights = base.snapshots.last().unwrap().clone();

    // The same net with its last layer renamed: that layer is not in the file.
    let renamed = common::small_net(16).replace("name: \"ip2\"", "name: \"ip2_new\"");
    let path = common::write(&dir, &renamed, &common::solver("net.prototxt", 1, 0, 0, "snapshot_after_train: false"));
    let solver = SolverParam::load(&path).unwrap();
    let opts = TrainOptions { weights: Some(weights.clone()), ..quiet() };
    let tuned = train(&solver, &opts, &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(tuned.losses.len(), 1);
    // With every layer required, the missing one is an error naming it.
    let (net, _) = build_nets(&solver, &DataCache::default()).unwrap();
    let layout = caffe_geeps::net::params::ParamLayout::of(&net);
    let err = layout.from_caffemodel(&weights).unwrap_err().to_string();
    assert!(err.contains("has no weights for layer `ip2_new`"), "{err}");
    let (_, missing) = layout.fine_tune(&weights, None).unwrap();
    assert_eq!(missing, ["ip2_new"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_data_source_names_what_was_looked_for_and_where() {
    let dir = common::scratch("no-source");
    let net = common::small_net(16).replacen(&common::data("train"), "examples/mnist/mnist_train_lmdb", 1);
    let path = common::write(&dir, &net, &common::solver("net.prototxt", 2, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let err = train(&solver, &quiet(), &Cluster::in_process(1).unwrap()).unwrap_err().to_string();
    // At the layer's line, with what was looked for.
    assert!(
        err.contains("net.prototxt:2: layer `d`: examples/mnist/mnist_train_lmdb: data_param.source not found"),
        "{err}"
    );
    assert!(err.contains("an LMDB folder") && err.contains("IDX files"), "{err}");
    // Both places a relative source is looked for.
    assert!(err.contains(&format!("at examples/mnist/mnist_train_lmdb and at {}", dir.display())), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_test_iter_of_many_passes_over_the_test_set_is_refused_at_its_line() {
    let dir = common::scratch("test-iter");
    let path = common::write(&dir, &common::small_net(16), &common::solver("net.prototxt", 2, 1_000_000_000, 1, ""));
    let solver = SolverParam::load(&path).unwrap();
    let err = train(&solver, &quiet(), &Cluster::in_process(1).unwrap()).unwrap_err();
    let text = err.to_string();
    // The solver's 10th line: the arithmetic, and the value of one pass.
    assert!(text.starts_with(&format!("{}:10: test_iter 1000000000 x batch 100", path.display())), "{text}");
    assert!(text.contains("passes over the test set of") && text.contains("one pass is test_iter: "), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

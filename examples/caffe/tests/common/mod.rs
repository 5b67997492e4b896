//! Helpers shared by the integration tests: a scratch directory per test,
//! the bundled data's path, small prototxt files written there, and the
//! first problem a broken net prototxt is refused with.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use geeps_caffe::proto::net::NetParam;
use geeps_caffe::Error;

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("geeps-caffe-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The bundled Fashion-MNIST subset's prefix for `train` or `t10k`.
pub fn data(prefix: &str) -> String {
    format!("{}/../data/{prefix}", env!("CARGO_MANIFEST_DIR"))
}

pub fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

/// A small LeNet-like net (fewer filters) on the bundled data, with a
/// dropout and a sigmoid so every layer type trains.
pub fn small_net(train_batch: usize) -> String {
    format!(
        r#"name: "small"
layer {{ name: "d" type: "Data" top: "data" top: "label" include {{ phase: TRAIN }}
  transform_param {{ scale: 0.00390625 }} data_param {{ source: "{train}" batch_size: {train_batch} }} }}
layer {{ name: "d" type: "Data" top: "data" top: "label" include {{ phase: TEST }}
  transform_param {{ scale: 0.00390625 }} data_param {{ source: "{test}" batch_size: 100 }} }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1" param {{ lr_mult: 1 }} param {{ lr_mult: 2 }}
  convolution_param {{ num_output: 6 kernel_size: 5 stride: 1 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "tanh1" type: "TanH" bottom: "pool1" top: "pool1" }}
layer {{ name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param {{ num_output: 8 kernel_size: 3 pad: 1 stride: 2 weight_filler {{ type: "gaussian" std: 0.1 }} }} }}
layer {{ name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param {{ pool: AVE kernel_size: 2 stride: 2 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
  inner_product_param {{ num_output: 32 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "drop1" type: "Dropout" bottom: "ip1" top: "drop1" dropout_param {{ dropout_ratio: 0.2 }} }}
layer {{ name: "sig1" type: "Sigmoid" bottom: "drop1" top: "sig1" }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "sig1" top: "ip2"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy" include {{ phase: TEST }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"#,
        train = data("train"),
        test = data("t10k"),
    )
}

/// The shipped LeNet with absolute data sources and a train batch of `batch`.
pub fn lenet(batch: usize) -> String {
    let src = std::fs::read_to_string(models().join("lenet_train_test.prototxt")).expect("shipped LeNet");
    src.replace("\"../../data/train\"", &format!("\"{}\"", data("train")))
        .replace("\"../../data/t10k\"", &format!("\"{}\"", data("t10k")))
        .replace("batch_size: 64", &format!("batch_size: {batch}"))
}

/// A solver for `net` (a file name beside it) with the given schedule. It
/// writes no weights unless `extra` asks for snapshots.
pub fn solver(net: &str, max_iter: u64, test_iter: u64, test_interval: u64, extra: &str) -> String {
    let quiet = if extra.contains("snapshot") { "" } else { "snapshot_after_train: false\n" };
    format!(
        "net: \"{net}\"\nbase_lr: 0.05\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"step\"\ngamma: 0.5\n\
         stepsize: 20\nmax_iter: {max_iter}\ndisplay: 0\ntest_iter: {test_iter}\ntest_interval: {test_interval}\n\
         random_seed: 7\n{quiet}{extra}\n"
    )
}

/// Writes `net.prototxt` and `solver.prototxt` into `dir`; returns the solver's path.
pub fn write(dir: &Path, net: &str, solver: &str) -> PathBuf {
    std::fs::write(dir.join("net.prototxt"), net).expect("write net");
    let s = dir.join("solver.prototxt");
    std::fs::write(&s, solver).expect("write solver");
    s
}

/// The line and message of the first problem `src` (a net prototxt) is
/// refused with; panics if it reads.
pub fn net_err(src: &str) -> (usize, String) {
    match NetParam::parse(src, Path::new("broken.prototxt")) {
        Err(Error::Prototxt { line, msg, .. }) => (line, msg),
        Err(Error::Problems { mut problems, .. }) => problems.remove(0),
        Err(other) => panic!("expected a prototxt error, got {other}"),
        Ok(_) => panic!("expected an error for:\n{src}"),
    }
}

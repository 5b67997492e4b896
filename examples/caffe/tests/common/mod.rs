//! Helpers shared by the integration tests: a scratch directory per test,
//! the bundled data's path, small prototxt files written there, and the
//! first problem a broken net prototxt is refused with, and the reference
//! trainer on plain memory that geeps runs are compared with.

#![allow(dead_code)]

pub mod deploy_to_train;
pub mod substitute;

use std::path::{Path, PathBuf};

use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::proto::net::NetParam;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::PsOptions;
use caffe_geeps::solvers::solve::{build_nets, iteration_seed, TrainOptions};
use caffe_geeps::solvers::{clip_factor, layer_delta, learning_rate, sumsq, Rule, Step};
use caffe_geeps::Error;

pub fn quiet(ps: PsOptions) -> TrainOptions {
    TrainOptions { ps, ..TrainOptions::default() }
}

/// Trains `solver` with one worker on plain memory, as Caffe's Solver::Step
/// does: iter_size forward/backward passes summing the gradients, then
/// clipping, and each layer's step. Returns the final parameters and the
/// loss of every iteration (averaged over its mini-batches).
pub fn reference(solver: &SolverParam) -> (Vec<Vec<f32>>, Vec<f32>) {
    let (net, _) = build_nets(solver, &DataCache::default()).unwrap();
    let layout = ParamLayout::of(&net);
    let seed = solver.random_seed.unwrap();
    let rule = Rule::of(solver);
    let mut params = layout.initial(&net, seed);
    let mut history: Vec<Vec<f32>> = params.iter().map(|p| vec![0.0; rule.history_slots() * p.len()]).collect();
    let mut plain = Plain::new(&net, 0, 1).unwrap();
    let loss_at = net.outputs.iter().position(|&b| net.blobs[b].name == "loss").unwrap();
    let mut losses = Vec::new();
    for iter in 0..solver.max_iter {
        let mut sums: Vec<Vec<f32>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
        let mut loss = 0.0;
        for k in 0..solver.iter_size {
            let mut grads: Vec<Vec<f32>> = vec![Vec::new(); net.layers.len()];
            let mut views: Vec<&[f32]> = vec![&[]; net.layers.len()];
            for (lp, v) in layout.layers.iter().zip(&params) {
                for &u in &lp.users {
                    views[u] = v;
                    grads[u] = vec![0.0; lp.len];
                }
            }
            let seed = iteration_seed(seed, 0, iter * solver.iter_size + k);
            let out = plain.forward(&views, true, seed).unwrap();
            plain.backward(&views, &mut grads);
            loss += out[loss_at] / solver.iter_size as f32;
            // A parameter shared by several layers gets the sum of their gradients.
            for (lp, sum) in layout.layers.iter().zip(&mut sums) {
                for &u in &lp.users {
                    sum.iter_mut().zip(&grads[u]).for_each(|(s, g)| *s += g);
                }
            }
        }
        losses.push(loss);
        let norm2 = layout.layers.iter().zip(&sums).map(|(lp, s)| sumsq(lp, s)).sum();
        let clip = clip_factor(solver.clip_gradients, norm2);
        let step = Step { rate: learning_rate(solver, iter), iter, scale: 1.0, clip };
        for (p, lp) in layout.layers.iter().enumerate() {
            layer_delta(lp, &rule, step, &params[p], &mut sums[p], &mut history[p]);
            params[p].iter_mut().zip(&sums[p]).for_each(|(w, d)| *w += d);
        }
    }
    (params, losses)
}

pub fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len());
    for (l, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.len(), y.len());
        for (i, (u, v)) in x.iter().zip(y).enumerate() {
            assert!((u - v).abs() <= 1e-5 + 1e-4 * v.abs(), "{what}: layer {l} value {i}: {u} vs {v}");
        }
    }
}

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caffe-geeps-{}-{name}", std::process::id()));
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

/// A net that names every layer type a prototxt may use (in place where
/// Caffe's nets run them so; Splits where a blob feeds two layers), on the
/// bundled data.
pub fn every_type_net() -> String {
    format!(
        r#"name: "every_type"
layer {{ name: "d" type: "Data" top: "data" top: "label" include {{ phase: TRAIN }}
  transform_param {{ scale: 0.00390625 mean_value: 33 crop_size: 24 mirror: true }}
  data_param {{ source: "{train}" batch_size: 8 }} }}
layer {{ name: "d" type: "Data" top: "data" top: "label" include {{ phase: TEST }}
  transform_param {{ scale: 0.00390625 mean_value: 33 crop_size: 24 }}
  data_param {{ source: "{test}" batch_size: 10 }} }}
layer {{ name: "shape" type: "Input" top: "unused" input_param {{ shape {{ dim: 2 dim: 3 }} }} }}
layer {{ name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param {{ num_output: 8 kernel_size: 3 pad: 2 dilation: 2 bias_term: false
    weight_filler {{ type: "msra" }} }} }}
layer {{ name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  param {{ lr_mult: 0 }} param {{ lr_mult: 0 }} param {{ lr_mult: 0 }} }}
layer {{ name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param {{ bias_term: true }} }}
layer {{ name: "prelu1" type: "PReLU" bottom: "conv1" top: "conv1" }}
layer {{ name: "conv2a" type: "Convolution" bottom: "conv1" top: "conv2a"
  convolution_param {{ num_output: 8 kernel_size: 3 pad: 1 group: 2 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "conv2b" type: "Convolution" bottom: "conv1" top: "conv2b"
  convolution_param {{ num_output: 8 kernel_size: 1 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "sum" type: "Eltwise" bottom: "conv2a" bottom: "conv2b" top: "sum"
  eltwise_param {{ operation: SUM coeff: 1 coeff: 0.5 }} }}
layer {{ name: "norm" type: "LRN" bottom: "sum" top: "norm" lrn_param {{ local_size: 3 alpha: 0.0001 beta: 0.75 }} }}
layer {{ name: "pool" type: "Pooling" bottom: "norm" top: "pool" pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "half" type: "Power" bottom: "pool" top: "half" power_param {{ scale: 0.5 }} }}
layer {{ name: "cat" type: "Concat" bottom: "pool" bottom: "half" top: "cat" }}
layer {{ name: "flat" type: "Flatten" bottom: "cat" top: "flat" }}
layer {{ name: "ip" type: "InnerProduct" bottom: "flat" top: "ip"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip" top: "ip" relu_param {{ negative_slope: 0.1 }} }}
layer {{ name: "tanh" type: "TanH" bottom: "ip" top: "ip" }}
layer {{ name: "sig" type: "Sigmoid" bottom: "ip" top: "ip" }}
layer {{ name: "drop" type: "Dropout" bottom: "ip" top: "ip" dropout_param {{ dropout_ratio: 0.1 }} }}
layer {{ name: "scores" type: "Reshape" bottom: "ip" top: "scores" reshape_param {{ shape {{ dim: 0 dim: -1 }} }} }}
layer {{ name: "prob" type: "Softmax" bottom: "scores" top: "prob" include {{ phase: TEST }} }}
layer {{ name: "accuracy" type: "Accuracy" bottom: "scores" bottom: "label" top: "accuracy" include {{ phase: TEST }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "scores" bottom: "label" top: "loss" }}
"#,
        train = data("train"),
        test = data("t10k"),
    )
}

/// A free local TCP port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free local port").port()
}

/// Waits for `child` (a rank), killing it past `deadline`; requires success
/// and returns its stdout and stderr.
pub fn finish(mut child: std::process::Child, deadline: std::time::Instant, name: &str) -> (String, String) {
    loop {
        match child.try_wait().expect("wait for a rank") {
            Some(_) => break,
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                panic!("{name} did not finish in time");
            }
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    let out = child.wait_with_output().expect("rank output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name} failed: {stderr}\n{stdout}");
    (stdout, stderr)
}

/// The `caffe-geeps` binary run with `args`, its environment free of what
/// would change its logging or make it a rank.
pub fn caffe(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_caffe-geeps"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GEEPS_RANK")
        .output()
        .expect("run caffe-geeps")
}

/// [`caffe`] that must succeed (else panics with what it printed); its stdout.
pub fn caffe_ok(args: &[&str]) -> String {
    let out = caffe(args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{args:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

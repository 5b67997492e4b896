//! Caffe's `time` and `test` on deploy files, as a Caffe user runs them:
//! an `Input` layer (BVLC's LeNet deploy, shipped as models/lenet.prototxt)
//! and the legacy net-level `input` / `input_dim` / `input_shape` fields
//! (an AlexNet-style deploy at small dims), upgraded to an Input layer;
//! Caffe's output lines; the refused legacy forms naming what to fix; and
//! `-gpu`, which computes on the (emulated) GPU with the CPU's results, or
//! without a driver fails saying so. The GPU runs are skipped without a
//! CUDA device unless GEEPS_REQUIRE_CUDA=1.

mod common;

use std::path::{Path, PathBuf};

use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::net::Net;
use caffe_geeps::proto::layer_spec::LayerSpec;
use caffe_geeps::proto::net::{LayerKind, NetParam, Phase};
use caffe_geeps::proto::net_state::NetState;

/// Fails (not a usage error, not a panic); returns stderr.
fn fails(args: &[&str]) -> String {
    let out = common::caffe(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn lenet_deploy() -> String {
    s(&common::models().join("lenet.prototxt"))
}

/// An AlexNet-style deploy with Caffe's legacy input fields, at small dims.
const ALEXNET_LEGACY: &str = r#"name: "AlexNetSmall"
input: "data"
input_dim: 2
input_dim: 3
input_dim: 35
input_dim: 35
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 11 stride: 4 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1" lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 8 pad: 2 kernel_size: 5 group: 2 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "fc6" type: "InnerProduct" bottom: "pool2" top: "fc6"
  inner_product_param { num_output: 16 weight_filler { type: "gaussian" std: 0.005 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu6" type: "ReLU" bottom: "fc6" top: "fc6" }
layer { name: "drop6" type: "Dropout" bottom: "fc6" top: "fc6" dropout_param { dropout_ratio: 0.5 } }
layer { name: "fc8" type: "InnerProduct" bottom: "fc6" top: "fc8"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.01 } bias_filler { type: "constant" value: 0.5 } } }
layer { name: "prob" type: "Softmax" bottom: "fc8" top: "prob" }
"#;

/// Writes the filler values of `model`'s TEST net as a .caffemodel beside it.
fn weights_for(model: &Path, out: &Path) -> PathBuf {
    let param = NetParam::load(model).unwrap();
    let net = Net::build_for(&param, &NetState::phase(Phase::Test), &DataCache::default()).unwrap();
    let layout = ParamLayout::of(&net);
    layout.write_caffemodel(&net.name, &layout.initial(&net, 11), out).unwrap();
    out.to_path_buf()
}

/// The `NAME\tforward: X ms.` value of `layer` in `time`'s output.
fn layer_ms(stdout: &str, layer: &str, pass: &str) -> f64 {
    let prefix = format!("{layer:>10}\t{pass}: ");
    let line = stdout.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix:?}:\n{stdout}"));
    line[prefix.len()..].trim_end_matches(" ms.").parse().unwrap()
}

fn total_ms(stdout: &str, what: &str) -> f64 {
    let line = stdout.lines().find_map(|l| l.strip_prefix(what)).unwrap_or_else(|| panic!("no {what:?}:\n{stdout}"));
    line.trim_end_matches(" ms.").parse().unwrap()
}

#[test]
fn time_on_the_lenet_deploy_prints_caffes_lines() {
    for args in [
        vec!["time", "-model", &lenet_deploy(), "-iterations", "2"],
        vec!["time", "--model", &lenet_deploy(), "--iterations=2"],
    ] {
        let out = common::caffe_ok(&args);
        assert!(out.lines().any(|l| l.starts_with("Using CPU, ")), "{out}");
        assert!(out.contains("Testing for 2 iterations of batch 64."), "{out}");
        assert!(out.contains("Average time per layer:\n"), "{out}");
        for layer in ["data", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "prob"] {
            layer_ms(&out, layer, "forward");
            layer_ms(&out, layer, "backward");
        }
        // No loss in a deploy file, yet backward runs, as in Caffe's `time`.
        assert!(layer_ms(&out, "conv2", "backward") > 0.0, "{out}");
        let (f, b) = (total_ms(&out, "Average Forward pass: "), total_ms(&out, "Average Backward pass: "));
        let fb = total_ms(&out, "Average Forward-Backward: ");
        assert!(f > 0.0 && b > 0.0 && fb >= f + b - 1e-3, "{out}");
        assert!(total_ms(&out, "Total Time: ") >= fb * 2.0 - 1e-3, "{out}");
        assert!(out.contains("*** Benchmark ends ***"), "{out}");
    }
}

#[test]
fn legacy_input_fields_become_an_input_layer() {
    let param = NetParam::parse(ALEXNET_LEGACY, Path::new("alexnet.prototxt")).unwrap();
    let first = &param.layers[0];
    assert_eq!((first.name.as_str(), &first.tops[..]), ("input", &["data".to_string()][..]));
    assert_eq!(first.kind, LayerKind::Spec(LayerSpec::Input { shapes: vec![vec![2, 3, 35, 35]], tops: 1 }));
    assert_eq!(first.line, 2);
    // `input_shape` is the newer spelling of the same thing.
    let shaped = ALEXNET_LEGACY.replace(
        "input_dim: 2\ninput_dim: 3\ninput_dim: 35\ninput_dim: 35",
        "input_shape { dim: 2 dim: 3 dim: 35 dim: 35 }",
    );
    assert_eq!(NetParam::parse(&shaped, Path::new("a.prototxt")).unwrap().layers[0], *first);

    let dir = common::scratch("deploy-legacy");
    let model = dir.join("alexnet.prototxt");
    std::fs::write(&model, ALEXNET_LEGACY).unwrap();
    let out = common::caffe_ok(&["time", "-model", &s(&model), "-iterations", "1"]);
    assert!(out.contains("Testing for 1 iterations of batch 2."), "{out}");
    for layer in ["input", "conv1", "norm1", "conv2", "fc6", "drop6", "fc8", "prob"] {
        layer_ms(&out, layer, "forward");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_legacy_inputs_say_what_to_write() {
    let base = "layer { name: \"r\" type: \"ReLU\" bottom: \"data\" top: \"r\" }\n";
    for (head, line, words) in [
        ("input: \"data\"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 8\n", 2, "four (num, channels, height, width)"),
        ("input: \"data\"\n", 1, "without its shape"),
        ("input_dim: 1\n", 1, "no `input` names the blob"),
        ("input: \"data\"\ninput_dim: 1\ninput_shape { dim: 1 }\n", 2, "not both"),
        ("input: \"data\"\ninput_shape { dim: 1 dim: 0 }\n", 1, "at least 1"),
        ("input: \"a\"\ninput: \"b\"\ninput_shape { dim: 1 }\n", 3, "one shape per input"),
    ] {
        let (l, msg) = common::net_err(&format!("{head}{base}"));
        assert_eq!(l, line, "{head}: {msg}");
        assert!(msg.contains(words), "{head}: {msg}");
    }
    // A net with neither a Data nor an Input layer says how to declare one.
    let dir = common::scratch("deploy-none");
    let model = dir.join("none.prototxt");
    std::fs::write(&model, "layer { name: \"r\" type: \"ReLU\" bottom: \"x\" top: \"r\" }\n").unwrap();
    let err = fails(&["time", "-model", &s(&model)]);
    assert!(err.contains("reads blob `x`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_on_a_deploy_file_averages_each_output() {
    let dir = common::scratch("deploy-test");
    let weights = weights_for(&common::models().join("lenet.prototxt"), &dir.join("lenet.caffemodel"));
    let out = common::caffe_ok(&["test", "-model", &lenet_deploy(), "-weights", &s(&weights), "-iterations", "2"]);
    assert!(out.contains("Running for 2 iterations."), "{out}");
    // Zero images through zero biases: every class equally likely.
    assert_eq!(out.lines().filter(|l| l.starts_with("Batch 1, prob = ")).count(), 640, "{out}");
    assert!(out.contains("Loss: 0\n"), "{out}");
    assert_eq!(out.lines().filter(|l| *l == "prob = 0.1").count(), 640, "{out}");

    // Weights of another shape are refused naming the layer.
    let model = dir.join("alexnet.prototxt");
    std::fs::write(&model, ALEXNET_LEGACY).unwrap();
    let err = fails(&["test", "-model", &s(&model), "-weights", &s(&weights), "-iterations", "1"]);
    assert!(err.contains("layer `conv1`") && err.contains("[8, 3, 11, 11]"), "{err}");
    // Layers the weights lack keep their fillers, as Caffe's CopyTrainedLayersFrom.
    let weights = weights_for(&model, &dir.join("alexnet.caffemodel"));
    let renamed = dir.join("alexnet_new_fc8.prototxt");
    std::fs::write(&renamed, ALEXNET_LEGACY.replace("name: \"fc8\"", "name: \"fc8_new\"")).unwrap();
    let out = common::caffe(&["test", "-model", &s(&renamed), "-weights", &s(&weights), "-iterations", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("has no weights for layer(s) fc8_new"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The (first) number of `name = v` lines of `test`'s output.
fn value(out: &str, name: &str) -> f32 {
    let prefix = format!("{name} = ");
    let line = out.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {prefix}:\n{out}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn gpu_flag_computes_on_the_gpu_as_on_the_cpu() {
    let dir = common::scratch("deploy-gpu");
    let model = dir.join("lenet_train_test.prototxt");
    std::fs::write(&model, common::lenet(16)).unwrap();
    let weights = weights_for(&model, &dir.join("lenet.caffemodel"));
    let (m, w) = (s(&model), s(&weights));
    if geeps_testkit::Backend::cuda_for("gpu_flag_computes_on_the_gpu_as_on_the_cpu").is_none() {
        // Without a driver: an error that says so, for both commands.
        let err = fails(&["test", "-model", &m, "-weights", &w, "-gpu", "0"]);
        assert!(err.contains("-gpu 0"), "{err}");
        let err = fails(&["time", "-model", &m, "-gpu", "0"]);
        assert!(err.contains("-gpu 0"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let cpu = common::caffe_ok(&["test", "-model", &m, "-weights", &w, "-iterations", "2"]);
    let gpu = common::caffe_ok(&["test", "-model", &m, "-weights", &w, "-iterations", "2", "-gpu", "0"]);
    assert!(gpu.contains("Using GPUs 0\nGPU 0: ") && gpu.contains("compute capability"), "{gpu}");
    for name in ["accuracy", "loss"] {
        let (c, g) = (value(&cpu, name), value(&gpu, name));
        assert!((c - g).abs() <= 1e-4 * c.abs().max(1.0), "{name}: CPU {c}, GPU {g}");
    }
    let out = common::caffe_ok(&["time", "-model", &lenet_deploy(), "-iterations", "1", "-gpu", "0"]);
    assert!(out.contains("Using GPUs 0\n"), "{out}");
    assert!(layer_ms(&out, "conv1", "backward") > 0.0, "{out}");
    total_ms(&out, "Average Forward-Backward: ");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A shipped ImageNet train_val with its two Data layers replaced by one
/// Input layer of batch 1 (image and label), as a deploy file declares it.
fn with_input(name: &str) -> String {
    let src = std::fs::read_to_string(common::models().join("imagenet").join(format!("{name}.prototxt"))).unwrap();
    let crop: usize = src.lines().find_map(|l| l.trim().strip_prefix("crop_size:")).unwrap().trim().parse().unwrap();
    let third = src.match_indices("\nlayer {").nth(2).unwrap().0;
    let head = src.lines().next().unwrap();
    format!(
        "{head}\nlayer {{ name: \"data\" type: \"Input\" top: \"data\" top: \"label\"\n  input_param {{ shape {{ dim: 1 dim: 3 \
         dim: {crop} dim: {crop} }} shape {{ dim: 1 }} }} }}{}",
        &src[third..]
    )
}

#[test]
fn time_runs_the_shipped_imagenet_nets_on_an_input_layer() {
    let dir = common::scratch("deploy-imagenet");
    for (name, conv) in
        [("alexnet_train_val", "conv1"), ("caffenet_train_val", "conv1"), ("googlenet_train_val", "conv1/7x7_s2")]
    {
        let model = dir.join(format!("{name}.prototxt"));
        std::fs::write(&model, with_input(name)).unwrap();
        let out = common::caffe_ok(&["time", "-model", &s(&model), "-iterations", "1"]);
        assert!(out.contains("Testing for 1 iterations of batch 1."), "{name}: {out}");
        assert!(layer_ms(&out, conv, "backward") > 0.0, "{name}: {out}");
        assert!(total_ms(&out, "Average Forward-Backward: ") > 0.0, "{name}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! Caffe's remaining standard layers in one net on the bundled data (a
//! siamese pair cut by Slice into ContrastiveLoss, Deconvolution cropped
//! to a reference, MVN, SPP, Bias, Embed, Parameter, Tile, Reduction,
//! ArgMax, HingeLoss, MultinomialLogisticLoss): it trains through geeps on
//! the CPU with finite, falling losses, and, with a CUDA device (the
//! emulated driver here), with these layers on the GPU (ArgMax, which has
//! no GPU code, staged through host memory), to the CPU's losses within
//! float noise. InfogainLoss with H = I read from
//! its `source` trains as SoftmaxWithLoss does. `test_compute_loss` adds
//! Caffe's `Test loss` line to each test.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::{DeviceChoice, PsOptions};
use caffe_geeps::solvers::solve::train;
use common::quiet;

fn net() -> String {
    format!(
        r#"name: "standard_layers"
layer {{ name: "d" type: "Data" top: "data" top: "label" transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{train}" batch_size: 8 }} }}
layer {{ name: "pair" type: "Slice" bottom: "data" top: "a" top: "b" slice_param {{ axis: 0 }} }}
layer {{ name: "labels" type: "Slice" bottom: "label" top: "la" top: "lb" slice_param {{ slice_dim: 0 slice_point: 4 }} }}
layer {{ name: "conv_a" type: "Convolution" bottom: "a" top: "ca"
  convolution_param {{ num_output: 4 kernel_size: 5 stride: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "conv_b" type: "Convolution" bottom: "b" top: "cb"
  convolution_param {{ num_output: 4 kernel_size: 5 stride: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "mvn" type: "MVN" bottom: "ca" top: "ma" }}
layer {{ name: "spp" type: "SPP" bottom: "ma" top: "sa" spp_param {{ pyramid_height: 2 }} }}
layer {{ name: "shift" type: "Bias" bottom: "sa" top: "sa" }}
layer {{ name: "fa" type: "InnerProduct" bottom: "sa" top: "fa" inner_product_param {{ num_output: 2 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "fb" type: "InnerProduct" bottom: "cb" top: "fb" inner_product_param {{ num_output: 2 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "pair_loss" type: "ContrastiveLoss" bottom: "fa" bottom: "fb" bottom: "la" top: "pair_loss"
  contrastive_loss_param {{ margin: 1 }} }}
layer {{ name: "up" type: "Deconvolution" bottom: "ma" top: "up"
  convolution_param {{ num_output: 1 kernel_size: 4 stride: 3 weight_filler {{ type: "bilinear" }} }} }}
layer {{ name: "targets" type: "DummyData" top: "ref" top: "target" top: "norms"
  dummy_data_param {{ shape {{ dim: 4 dim: 1 dim: 20 dim: 20 }} shape {{ dim: 4 dim: 1 dim: 20 dim: 20 }} shape {{ dim: 4 }}
    data_filler {{ type: "constant" }} data_filler {{ type: "uniform" min: 0 max: 1 }} data_filler {{ type: "constant" value: 1 }} }} }}
layer {{ name: "crop" type: "Crop" bottom: "up" bottom: "ref" top: "upc" crop_param {{ axis: 2 offset: 2 }} }}
layer {{ name: "recon" type: "EuclideanLoss" bottom: "upc" bottom: "target" top: "recon" loss_weight: 0.1 }}
layer {{ name: "embed" type: "Embed" bottom: "lb" top: "e"
  embed_param {{ num_output: 3 input_dim: 10 weight_filler {{ type: "uniform" min: -0.5 max: 0.5 }} }} }}
layer {{ name: "offset" type: "Parameter" top: "p" parameter_param {{ shape {{ dim: 3 }} }} }}
layer {{ name: "add" type: "Bias" bottom: "e" bottom: "p" top: "ep" }}
layer {{ name: "tile" type: "Tile" bottom: "ep" top: "ept" tile_param {{ tiles: 2 }} }}
layer {{ name: "norm" type: "Reduction" bottom: "ept" top: "n" reduction_param {{ operation: SUMSQ axis: 1 coeff: 0.5 }} }}
layer {{ name: "norm_loss" type: "EuclideanLoss" bottom: "n" bottom: "norms" top: "norm_loss" }}
layer {{ name: "scores" type: "InnerProduct" bottom: "cb" top: "sc" inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "hinge" type: "HingeLoss" bottom: "sc" bottom: "lb" top: "hinge" hinge_loss_param {{ norm: L2 }} loss_weight: 0.1 }}
layer {{ name: "prob" type: "Softmax" bottom: "sc" top: "prob" }}
layer {{ name: "nll" type: "MultinomialLogisticLoss" bottom: "prob" bottom: "lb" top: "nll" }}
layer {{ name: "best" type: "ArgMax" bottom: "sc" top: "best" argmax_param {{ top_k: 2 }} }}
layer {{ name: "quiet" type: "Silence" bottom: "best" }}
"#,
        train = common::data("train"),
    )
}

#[test]
fn standard_layers_train_on_the_cpu_and_staged_on_the_gpu() {
    let dir = common::scratch("standard-layers");
    let solver = common::solver("net.prototxt", 20, 0, 0, "").replace("base_lr: 0.05", "base_lr: 0.01");
    let path = common::write(&dir, &net(), &solver);
    let solver = SolverParam::load(&path).unwrap();
    let cpu = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert!(cpu.losses.iter().all(|l| l.is_finite()), "{:?}", cpu.losses);
    let first = cpu.losses[..3].iter().sum::<f32>();
    let last = cpu.losses[17..].iter().sum::<f32>();
    assert!(last < first, "the loss falls: {:?}", cpu.losses);
    if geeps_testkit::Backend::cuda_for("standard_layers_train_on_the_cpu_and_staged_on_the_gpu").is_some() {
        let opts = PsOptions { device: DeviceChoice::Cuda(vec![0]), ..PsOptions::default() };
        let gpu = train(&solver, &quiet(opts), &Cluster::in_process(1).unwrap()).unwrap();
        for (i, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
            assert!((g - c).abs() <= 1e-3 * c.abs().max(1.0), "iteration {i}: GPU {g}, CPU {c}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn test_compute_loss_logs_the_weighted_sum_of_the_test_losses() {
    let dir = common::scratch("test-compute-loss");
    let net = common::small_net(16).replace(
        r#"layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }"#,
        r#"layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" loss_weight: 2 }"#,
    );
    assert!(net.contains("loss_weight: 2"));
    let solver = common::write(&dir, &net, &common::solver("net.prototxt", 2, 2, 2, "test_compute_loss: true"));
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let out = common::caffe_ok(&["train", "-solver", &s(&solver), "-workers=1", "-no_progress"]);
    let loss_line = out.lines().find_map(|l| l.split_once("Test loss: ")).map(|(_, v)| v.trim().to_string());
    let loss: f32 = loss_line.unwrap_or_else(|| panic!("no Test loss line:\n{out}")).parse().unwrap();
    let out_line = out.lines().find_map(|l| l.split_once("Test net output #1: loss = ")).expect("the loss output");
    let mean: f32 = out_line.1.split_whitespace().next().unwrap().parse().unwrap();
    assert!((loss - 2.0 * mean).abs() <= 1e-5 * loss.abs().max(1.0), "Test loss {loss}, loss output {mean}:\n{out}");
    // Without the field, no such line.
    let solver = common::write(&dir, &net, &common::solver("net.prototxt", 2, 2, 2, ""));
    assert!(!common::caffe_ok(&["train", "-solver", &s(&solver), "-workers=1", "-no_progress"]).contains("Test loss"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn infogain_loss_reads_its_matrix_from_source() {
    use caffe_geeps::proto::caffe::{BlobProto, BlobShape};
    let dir = common::scratch("infogain-source");
    // H = I: the loss is SoftmaxWithLoss's, so training follows it step for step.
    let h: Vec<f32> = (0..100).map(|i| if i % 11 == 0 { 1.0 } else { 0.0 }).collect();
    let blob = BlobProto { shape: Some(BlobShape { dim: vec![1, 1, 10, 10] }), data: h, ..BlobProto::default() };
    caffe_geeps::proto::binary::write(&dir.join("H.binaryproto"), &blob).unwrap();
    let softmax = common::small_net(16);
    let net = softmax.replace(
        r#"layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }"#,
        r#"layer { name: "loss" type: "InfogainLoss" bottom: "ip2" bottom: "label" top: "loss"
  infogain_loss_param { source: "H.binaryproto" } }"#,
    );
    assert!(net.contains("InfogainLoss"));
    let losses = |net: &str| {
        let path = common::write(&dir, net, &common::solver("net.prototxt", 10, 0, 0, ""));
        let solver = SolverParam::load(&path).unwrap();
        train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).map(|r| r.losses)
    };
    let (info, soft) = (losses(&net).unwrap(), losses(&softmax).unwrap());
    for (i, (a, b)) in info.iter().zip(&soft).enumerate() {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "iteration {i}: InfogainLoss {a}, SoftmaxWithLoss {b}");
    }
    // A matrix of the wrong size is named.
    let small = BlobProto { data: vec![1.0; 4], ..BlobProto::default() };
    caffe_geeps::proto::binary::write(&dir.join("H.binaryproto"), &small).unwrap();
    let err = losses(&net).err().unwrap();
    assert!(err.to_string().contains("infogain matrix holds 4 values, not 10 x 10"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

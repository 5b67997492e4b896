//! The pointwise layers and the simple losses (AbsVal, BNLL, Exp, Log,
//! Threshold, ELU, EuclideanLoss, SigmoidCrossEntropyLoss, which once had
//! no GPU code) with ArgMax and Silence, which still have none, in one net
//! on the bundled data: it trains through geeps on the CPU with finite,
//! falling losses, and — with a CUDA device (the emulated driver here) —
//! with its rows and layers on the GPU, ArgMax and Silence staged through
//! host memory, to the CPU's losses within float noise.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::{DeviceChoice, PsOptions};
use caffe_geeps::solvers::solve::train;
use common::quiet;

fn net() -> String {
    format!(
        r#"name: "cpu_only"
layer {{ name: "d" type: "Data" top: "data" top: "label" transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{train}" batch_size: 8 }} }}
layer {{ name: "targets" type: "DummyData" top: "targets"
  dummy_data_param {{ shape {{ dim: 8 dim: 6 }} data_filler {{ type: "uniform" min: 0 max: 1 }} }} }}
layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param {{ num_output: 4 kernel_size: 5 stride: 3 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "elu" type: "ELU" bottom: "conv" top: "conv" elu_param {{ alpha: 0.5 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "conv" top: "ip1"
  inner_product_param {{ num_output: 16 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "abs" type: "AbsVal" bottom: "ip1" top: "abs" }}
layer {{ name: "bnll" type: "BNLL" bottom: "abs" top: "bnll" }}
layer {{ name: "exp" type: "Exp" bottom: "bnll" top: "bnll" exp_param {{ scale: -0.5 }} }}
layer {{ name: "log" type: "Log" bottom: "bnll" top: "log" log_param {{ shift: 1 }} }}
layer {{ name: "gate" type: "Threshold" bottom: "log" top: "gate" threshold_param {{ threshold: 0.5 }} }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "log" top: "ip2"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "best" type: "ArgMax" bottom: "ip2" top: "best" argmax_param {{ top_k: 2 }} }}
layer {{ name: "quiet" type: "Silence" bottom: "gate" bottom: "best" }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
layer {{ name: "ip3" type: "InnerProduct" bottom: "log" top: "ip3"
  inner_product_param {{ num_output: 6 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "euclid" type: "EuclideanLoss" bottom: "ip3" bottom: "targets" top: "euclid" loss_weight: 0.5 }}
layer {{ name: "xent" type: "SigmoidCrossEntropyLoss" bottom: "ip3" bottom: "targets" top: "xent" }}
"#,
        train = common::data("train"),
    )
}

#[test]
fn cpu_only_layers_train_on_the_cpu_and_staged_on_the_gpu() {
    let dir = common::scratch("cpu-only-layers");
    let path = common::write(&dir, &net(), &common::solver("net.prototxt", 20, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let cpu = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert!(cpu.losses.iter().all(|l| l.is_finite()), "{:?}", cpu.losses);
    let first = cpu.losses[..3].iter().sum::<f32>();
    let last = cpu.losses[17..].iter().sum::<f32>();
    assert!(last < first, "the loss falls: {:?}", cpu.losses);
    if geeps_testkit::Backend::cuda_for("cpu_only_layers_train_on_the_cpu_and_staged_on_the_gpu").is_some() {
        let opts = PsOptions { device: DeviceChoice::Cuda(vec![0]), ..PsOptions::default() };
        let gpu = train(&solver, &quiet(opts), &Cluster::in_process(1).unwrap()).unwrap();
        for (i, (g, c)) in gpu.losses.iter().zip(&cpu.losses).enumerate() {
            assert!((g - c).abs() <= 1e-3 * c.abs().max(1.0), "iteration {i}: GPU {g}, CPU {c}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! Every layer's backward against finite differences of its forward, for
//! the bottom gradients and the parameter gradients, on random inputs
//! chosen away from kinks (ReLU at 0, ties in max pooling).

use caffe_geeps::layers::batch_norm::{BatchNorm, BatchNormConf};
use caffe_geeps::layers::concat::Concat;
use caffe_geeps::layers::conv::{Conv, ConvSpec};
use caffe_geeps::layers::eltwise::{Eltwise, EltwiseOp};
use caffe_geeps::layers::euclidean_loss::EuclideanLoss;
use caffe_geeps::layers::lrn::{Lrn, LrnConf, NormRegion};
use caffe_geeps::layers::power::{Power, PowerConf};
use caffe_geeps::layers::prelu::PRelu;
use caffe_geeps::layers::reshape::Reshape;
use caffe_geeps::layers::scale::{Scale, ScaleConf};
use caffe_geeps::layers::sigmoid_cross_entropy_loss::SigmoidCrossEntropyLoss;
use caffe_geeps::layers::silence::Silence;
use caffe_geeps::layers::softmax::Softmax;
use caffe_geeps::layers::spec::{LayerSpec, LossNorm, NeuronFn};
use caffe_geeps::layers::split::Split;
use caffe_geeps::layers::{self, count, Forward, Layer};
use caffe_geeps::proto::net::{
    ConvConf, Filler, InnerProductConf, LayerKind, Normalization, PoolConf, PoolMethod, PoolRound,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod gradcheck;
use gradcheck::{check, check_built, check_layer, distinct, random, xavier};

#[test]
fn convolution() {
    let conf = |stride, pad| ConvConf {
        num_output: 3,
        kernel: (3, 2),
        stride,
        pad,
        dilation: (1, 1),
        group: 1,
        bias_term: true,
        weight_filler: xavier(),
        bias_filler: Filler::Constant(0.0),
    };
    check(LayerKind::Convolution(conf((1, 1), (0, 0))), &[vec![3, 2, 6, 5]], None);
    check(LayerKind::Convolution(conf((2, 1), (1, 2))), &[vec![2, 2, 5, 6]], None);
    let one = ConvConf { kernel: (1, 1), ..conf((1, 1), (0, 0)) };
    check(LayerKind::Convolution(one), &[vec![2, 2, 3, 3]], None);
}

#[test]
fn pooling() {
    for method in [PoolMethod::Max, PoolMethod::Ave] {
        let conf =
            PoolConf { method, kernel: (2, 2), stride: (2, 2), pad: (0, 0), global: false, round: PoolRound::Ceil };
        check(LayerKind::Pooling(conf.clone()), &[vec![2, 3, 6, 6]], None);
        let overlapping = PoolConf { kernel: (3, 3), stride: (2, 2), pad: (1, 1), ..conf };
        check(LayerKind::Pooling(overlapping.clone()), &[vec![1, 2, 7, 6]], None);
        let floor = PoolConf { round: PoolRound::Floor, ..overlapping };
        check(LayerKind::Pooling(floor), &[vec![1, 2, 8, 7]], None);
    }
}

#[test]
fn inner_product() {
    let conf = InnerProductConf { num_output: 4, bias_term: true, weight_filler: xavier(), bias_filler: xavier() };
    check(LayerKind::InnerProduct(conf.clone()), &[vec![5, 2, 3, 2]], None);
    // More rows than one parallel block, so the split products are checked too.
    let wide = InnerProductConf { num_output: 19, ..conf };
    check(LayerKind::InnerProduct(wide), &[vec![37, 6]], None);
}

#[test]
fn elementwise() {
    check(LayerKind::ReLU { negative_slope: 0.0 }, &[vec![4, 7]], None);
    check(LayerKind::ReLU { negative_slope: 0.1 }, &[vec![4, 7]], None);
    check(LayerKind::Sigmoid, &[vec![3, 5]], None);
    check(LayerKind::TanH, &[vec![3, 5]], None);
    // The mask depends only on the seed, so the objective is smooth in the input.
    check(LayerKind::Dropout { ratio: 0.3 }, &[vec![6, 9]], None);
}

#[test]
fn softmax_with_loss() {
    check(LayerKind::SoftmaxWithLoss { normalization: Normalization::Batch }, &[vec![6, 5], vec![6]], Some(5));
    check(LayerKind::SoftmaxWithLoss { normalization: Normalization::None }, &[vec![3, 4], vec![3]], Some(4));
}

#[test]
fn accuracy_counts_ties_against() {
    let l = layers::build(&LayerKind::Accuracy { top_k: 1 }, &[vec![3, 3], vec![3]], false).unwrap();
    let scores = [0.1, 0.7, 0.2, 0.5, 0.5, 0.0, 0.9, 0.0, 0.1];
    let labels = [1.0, 0.0, 0.0];
    let mut top = vec![0.0];
    let mut tops: Vec<&mut [f32]> = vec![&mut top];
    l.forward(Forward {
        params: &[],
        bottoms: &[&scores, &labels],
        tops: &mut tops,
        aux: &mut [],
        train: false,
        seed: 0,
    });
    // Right, tied (wrong, as in Caffe), right.
    assert!((top[0] - 2.0 / 3.0).abs() < 1e-6, "{}", top[0]);
}

#[test]
fn grouped_dilated_convolution_without_bias() {
    let spec = ConvSpec {
        num_output: 4,
        kernel: (3, 2),
        stride: (1, 2),
        pad: (1, 0),
        dilation: (2, 1),
        group: 2,
        bias_term: false,
        weight_filler: xavier(),
        bias_filler: Filler::Constant(0.0),
    };
    let shape = vec![2, 4, 6, 5];
    let l = Conv::new(&spec, &shape).unwrap();
    assert_eq!(l.param_blobs().len(), 1, "bias_term: false has no bias blob");
    assert_eq!(l.param_blobs()[0].shape, vec![4, 2, 3, 2]);
    check_built(&l, &[shape]);
    let biased = ConvSpec { group: 4, dilation: (1, 2), stride: (1, 1), bias_term: true, ..spec };
    check_built(&Conv::new(&biased, &vec![1, 4, 4, 5]).unwrap(), &[vec![1, 4, 4, 5]]);
}

#[test]
fn inner_product_without_bias() {
    let conf = InnerProductConf { num_output: 3, bias_term: false, weight_filler: xavier(), bias_filler: xavier() };
    let l = layers::build(&LayerKind::InnerProduct(conf.clone()), &[vec![4, 5]], true).unwrap();
    assert_eq!(l.param_blobs().len(), 1);
    check(LayerKind::InnerProduct(conf), &[vec![4, 5]], None);
}

#[test]
fn lrn_across_and_within_channels() {
    let across = LrnConf { local_size: 3, alpha: 2.0, beta: 0.75, k: 1.5, region: NormRegion::AcrossChannels };
    check_built(&Lrn::new(across, &vec![2, 5, 2, 3]).unwrap(), &[vec![2, 5, 2, 3]]);
    let wide = LrnConf { local_size: 5, ..LrnConf::default() };
    check_built(&Lrn::new(wide, &vec![1, 7, 2, 2]).unwrap(), &[vec![1, 7, 2, 2]]);
    let within = LrnConf { local_size: 3, alpha: 3.0, beta: 0.75, k: 1.0, region: NormRegion::WithinChannel };
    check_built(&Lrn::new(within, &vec![2, 2, 4, 5]).unwrap(), &[vec![2, 2, 4, 5]]);
}

#[test]
fn concat_on_any_axis() {
    let shapes = [vec![2, 1, 3], vec![2, 3, 3], vec![2, 2, 3]];
    check_built(&Concat::new(1, &shapes).unwrap(), &shapes);
    let shapes = [vec![1, 2, 3], vec![3, 2, 3]];
    check_built(&Concat::new(0, &shapes).unwrap(), &shapes);
    let shapes = [vec![2, 2, 1], vec![2, 2, 4]];
    check_built(&Concat::new(-1, &shapes).unwrap(), &shapes);
}

#[test]
fn split_sums_its_gradients() {
    check_built(&Split::new(3, &vec![2, 3]).unwrap(), &[vec![2, 3]]);
}

#[test]
fn eltwise_sum_prod_max() {
    let shapes = [vec![2, 3, 2], vec![2, 3, 2], vec![2, 3, 2]];
    check_built(&Eltwise::new(EltwiseOp::Sum(vec![0.5, -2.0, 1.5]), &shapes).unwrap(), &shapes);
    check_built(&Eltwise::new(EltwiseOp::Sum(vec![]), &shapes).unwrap(), &shapes);
    check_built(&Eltwise::new(EltwiseOp::Prod, &shapes).unwrap(), &shapes);
    // Distinct values across all bottoms: no perturbation changes the winner.
    let mut rng = StdRng::seed_from_u64(5);
    let all = distinct(&mut rng, 36);
    let bottoms = all.chunks(12).map(|c| c.to_vec()).collect();
    check_layer(&Eltwise::new(EltwiseOp::Max, &shapes).unwrap(), bottoms, 3, None);
}

#[test]
fn flatten_and_reshape() {
    check_built(&Reshape::flatten(1, -1, &vec![2, 3, 2, 2]).unwrap(), &[vec![2, 3, 2, 2]]);
    check_built(&Reshape::new(&[0, -1, 2], 0, -1, &vec![2, 3, 4]).unwrap(), &[vec![2, 3, 4]]);
}

#[test]
fn softmax_along_an_axis() {
    check_built(&Softmax::new(1, &vec![2, 4, 3]).unwrap(), &[vec![2, 4, 3]]);
    check_built(&Softmax::new(-1, &vec![3, 5]).unwrap(), &[vec![3, 5]]);
}

#[test]
fn batch_norm_with_batch_and_global_statistics() {
    let shape = vec![3, 2, 2, 2];
    check_built(&BatchNorm::new(BatchNormConf::for_phase(true), &shape).unwrap(), std::slice::from_ref(&shape));
    let flat = vec![5, 3];
    check_built(&BatchNorm::new(BatchNormConf::for_phase(true), &flat).unwrap(), std::slice::from_ref(&flat));
    // Global statistics: mean (0.2, −0.1) and variance (0.5, 2) stored times the factor 2.
    let global = BatchNorm::new(BatchNormConf::for_phase(false), &shape).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let x = random(&mut rng, count(&shape));
    check_layer(&global, vec![x], 1, Some(vec![0.4, -0.2, 1.0, 4.0, 2.0]));
}

#[test]
fn scale_with_and_without_bias() {
    let conf = ScaleConf { bias_term: true, ..ScaleConf::default() };
    check_built(&Scale::new(conf, &vec![2, 3, 2, 2]).unwrap(), &[vec![2, 3, 2, 2]]);
    let two_axes = ScaleConf { num_axes: 2, ..ScaleConf::default() };
    check_built(&Scale::new(two_axes, &vec![2, 3, 2, 2]).unwrap(), &[vec![2, 3, 2, 2]]);
    let scalar = ScaleConf { axis: 0, num_axes: 0, bias_term: true, ..ScaleConf::default() };
    check_built(&Scale::new(scalar, &vec![4, 3]).unwrap(), &[vec![4, 3]]);
}

#[test]
fn prelu_per_channel_and_shared() {
    let shape = vec![2, 3, 2, 2];
    check_built(&PRelu::new(false, Filler::Constant(0.25), &shape).unwrap(), std::slice::from_ref(&shape));
    check_built(&PRelu::new(true, Filler::Constant(0.25), &shape).unwrap(), &[shape]);
}

#[test]
fn power() {
    for conf in [
        PowerConf { power: 2.0, scale: 0.5, shift: 1.5 },
        PowerConf { power: 1.0, scale: -3.0, shift: 0.5 },
        PowerConf { power: 0.5, scale: 0.25, shift: 2.0 },
    ] {
        check_built(&Power::new(conf, &vec![3, 4]), &[vec![3, 4]]);
    }
}

#[test]
fn pointwise_abs_bnll_exp_log_elu() {
    for f in [
        NeuronFn::AbsVal,
        NeuronFn::Bnll,
        NeuronFn::Exp { base: -1.0, scale: 0.5, shift: 0.2 },
        NeuronFn::Exp { base: 2.0, scale: 1.0, shift: 0.0 },
        NeuronFn::Elu(1.0),
        NeuronFn::Elu(0.5),
        // Inputs are within ±1.1: shift keeps shift + scale·x above 0.
        NeuronFn::Log { base: -1.0, scale: 1.0, shift: 2.0 },
        NeuronFn::Log { base: 10.0, scale: 0.5, shift: 1.5 },
    ] {
        check(LayerKind::Spec(LayerSpec::Neuron(f)), &[vec![4, 5]], None);
    }
}

#[test]
fn pointwise_values_are_caffes() {
    let run = |f: NeuronFn, x: &[f32]| {
        let l = layers::build(&LayerKind::Spec(LayerSpec::Neuron(f)), &[vec![x.len()]], true).unwrap();
        let mut top = if l.elementwise() { x.to_vec() } else { vec![0.0; x.len()] };
        let bottoms: Vec<&[f32]> = if l.elementwise() { Vec::new() } else { vec![x] };
        let mut tops: Vec<&mut [f32]> = vec![&mut top];
        l.forward(Forward { params: &[], bottoms: &bottoms, tops: &mut tops, aux: &mut [], train: true, seed: 0 });
        (top, l.has_backward())
    };
    assert_eq!(run(NeuronFn::AbsVal, &[-2.0, 3.0]).0, [2.0, 3.0]);
    assert_eq!(run(NeuronFn::Threshold(0.5), &[0.5, 0.6, -1.0]), (vec![0.0, 1.0, 0.0], false));
    let (b, _) = run(NeuronFn::Bnll, &[0.0, 100.0, -100.0]);
    assert!((b[0] - 2f32.ln()).abs() < 1e-6 && b[1] == 100.0 && b[2] >= 0.0 && b[2] < 1e-20, "{b:?}");
    let (e, _) = run(NeuronFn::Exp { base: 2.0, scale: 3.0, shift: 1.0 }, &[1.0]);
    assert!((e[0] - 16.0).abs() < 1e-4, "{e:?}");
    let (l, _) = run(NeuronFn::Log { base: 10.0, scale: 2.0, shift: 0.0 }, &[50.0]);
    assert!((l[0] - 2.0).abs() < 1e-5, "{l:?}");
    let (elu, _) = run(NeuronFn::Elu(2.0), &[1.5, -1.0]);
    assert!(elu[0] == 1.5 && (elu[1] - 2.0 * ((-1f32).exp() - 1.0)).abs() < 1e-6, "{elu:?}");
    // In place would lose the input these need: refused when built so.
    let err = layers::build(&LayerKind::Spec(LayerSpec::Neuron(NeuronFn::Elu(-1.0))), &[vec![2]], true).err().unwrap();
    assert!(err.contains(">= 0"), "{err}");
}

#[test]
fn silence_and_euclidean_loss() {
    let shapes = [vec![3, 4], vec![5]];
    check_built(&Silence::new(&shapes).unwrap(), &shapes);
    let shapes = [vec![3, 4], vec![3, 2, 2]];
    check_built(&EuclideanLoss::new(&shapes).unwrap(), &shapes);
    assert!(EuclideanLoss::new(&[vec![3, 4], vec![3, 5]]).err().unwrap().contains("same number of values"));
    assert!(Silence::new(&[]).err().unwrap().contains("at least one bottom"));
}

#[test]
fn sigmoid_cross_entropy_loss() {
    let mut rng = StdRng::seed_from_u64(5);
    for norm in [LossNorm::Batch, LossNorm::Count, LossNorm::None] {
        let shapes = [vec![3, 4], vec![3, 4]];
        let l = SigmoidCrossEntropyLoss::new(norm, &shapes).unwrap();
        // Large scores too: the loss stays finite and its gradient exact.
        let mut x = random(&mut rng, 12);
        x[0] = 40.0;
        x[1] = -40.0;
        let t: Vec<f32> = (0..12).map(|_| rng.gen_range(0.0..1.0f32)).collect();
        check_layer(&l, vec![x, t], 1, None);
    }
    // Against the textbook formula on small values.
    let l = SigmoidCrossEntropyLoss::new(LossNorm::Batch, &[vec![2, 1], vec![2, 1]]).unwrap();
    let (x, t) = ([0.3f32, -1.2], [1.0f32, 0.25]);
    let want: f32 = x
        .iter()
        .zip(&t)
        .map(|(x, t)| {
            let s = 1.0 / (1.0 + (-x).exp());
            -(t * s.ln() + (1.0 - t) * (1.0 - s).ln())
        })
        .sum::<f32>()
        / 2.0;
    let mut top = vec![0.0];
    let mut tops: Vec<&mut [f32]> = vec![&mut top];
    l.forward(Forward { params: &[], bottoms: &[&x, &t], tops: &mut tops, aux: &mut [], train: true, seed: 0 });
    assert!((top[0] - want).abs() < 1e-6, "{} vs {want}", top[0]);
}

//! Layers' forward values against small cases worked by hand from Caffe's
//! definitions, and their refusals of bad settings.

use caffe_geeps::layers::batch_norm::{BatchNorm, BatchNormConf};
use caffe_geeps::layers::concat::Concat;
use caffe_geeps::layers::conv::{Conv, ConvSpec};
use caffe_geeps::layers::eltwise::{Eltwise, EltwiseOp};
use caffe_geeps::layers::lrn::{Lrn, LrnConf, NormRegion};
use caffe_geeps::layers::power::{Power, PowerConf};
use caffe_geeps::layers::prelu::PRelu;
use caffe_geeps::layers::reshape::Reshape;
use caffe_geeps::layers::scale::{Scale, ScaleConf};
use caffe_geeps::layers::softmax::Softmax;
use caffe_geeps::layers::split::Split;
use caffe_geeps::layers::{count, Backward, Filler, Forward, Layer};

/// Runs `l` forward (in TRAIN) and returns its tops and backward state.
fn run(l: &dyn Layer, params: &[f32], bottoms: &[&[f32]]) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut tops: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| vec![0.0; count(s)]).collect();
    let mut aux = vec![0.0; l.aux_len()];
    if l.elementwise() {
        tops[0].copy_from_slice(bottoms[0]);
    }
    let b: Vec<&[f32]> = if l.elementwise() { Vec::new() } else { bottoms.to_vec() };
    let mut t: Vec<&mut [f32]> = tops.iter_mut().map(|v| v.as_mut_slice()).collect();
    l.forward(Forward { params, bottoms: &b, tops: &mut t, aux: &mut aux, train: true, seed: 0 });
    (tops, aux)
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} vs {want:?}");
    }
}

#[test]
fn lrn_values() {
    // Across: n = 3, α/n = 1, β = 1, k = 1: y_c = x_c / (1 + Σ neighbours²).
    let conf = LrnConf { local_size: 3, alpha: 3.0, beta: 1.0, k: 1.0, region: NormRegion::AcrossChannels };
    let l = Lrn::new(conf, &vec![1, 3, 1, 1]).unwrap();
    assert_close(&run(&l, &[], &[&[1.0, 2.0, 3.0]]).0[0], &[1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0]);
    // Within: a 3x3 window over a 2x2 plane covers all four; α/n² = 1, k ignored (1).
    let conf = LrnConf { local_size: 3, alpha: 9.0, beta: 1.0, k: 5.0, region: NormRegion::WithinChannel };
    let l = Lrn::new(conf, &vec![1, 1, 2, 2]).unwrap();
    assert_close(&run(&l, &[], &[&[1.0, 2.0, 3.0, 4.0]]).0[0], &[1.0 / 31.0, 2.0 / 31.0, 3.0 / 31.0, 4.0 / 31.0]);
    // β = 0.75 as AlexNet uses it, one channel: y = x · (k + α x²)^−0.75.
    let conf = LrnConf { local_size: 1, alpha: 0.5, beta: 0.75, k: 2.0, region: NormRegion::AcrossChannels };
    let l = Lrn::new(conf, &vec![1, 1, 1, 1]).unwrap();
    assert_close(&run(&l, &[], &[&[2.0]]).0[0], &[2.0 * 4f32.powf(-0.75)]);
    assert!(Lrn::new(LrnConf { local_size: 4, ..LrnConf::default() }, &vec![1, 5, 2, 2]).unwrap_err().contains("odd"));
    assert!(Lrn::new(LrnConf::default(), &vec![2, 5]).is_err());
}

#[test]
fn concat_split_reshape_values() {
    let l = Concat::new(1, &[vec![2, 1], vec![2, 2]]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 3]]);
    assert_eq!(run(&l, &[], &[&[1.0, 2.0], &[3.0, 4.0, 5.0, 6.0]]).0[0], vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    assert!(Concat::new(1, &[vec![2, 1], vec![3, 2]]).unwrap_err().contains("differ"));
    assert!(Concat::new(2, &[vec![2, 1]]).unwrap_err().contains("axis 2"));
    let s = Split::new(2, &vec![3]).unwrap();
    assert_eq!(run(&s, &[], &[&[1.0, 2.0, 3.0]]).0, vec![vec![1.0, 2.0, 3.0]; 2]);
    assert_eq!(Reshape::new(&[0, -1], 0, -1, &vec![2, 3, 4]).unwrap().top_shapes(), vec![vec![2, 12]]);
    assert_eq!(Reshape::new(&[2, 2], 1, 1, &vec![3, 4, 5]).unwrap().top_shapes(), vec![vec![3, 2, 2, 5]]);
    assert_eq!(Reshape::new(&[1], -1, 0, &vec![3, 4]).unwrap().top_shapes(), vec![vec![3, 4, 1]]);
    assert!(Reshape::new(&[-1, -1], 0, -1, &vec![2, 3]).unwrap_err().contains("more than one"));
    assert!(Reshape::new(&[5, -1], 0, -1, &vec![2, 3]).unwrap_err().contains("cannot infer"));
    assert!(Reshape::new(&[7], 0, -1, &vec![2, 3]).unwrap_err().contains("holds 7"));
    let f = Reshape::flatten(1, -1, &vec![2, 3, 4, 5]).unwrap();
    assert_eq!((f.type_name(), f.top_shapes()), ("Flatten", vec![vec![2, 60]]));
    assert_eq!(Reshape::flatten(1, 2, &vec![2, 3, 4, 5]).unwrap().top_shapes(), vec![vec![2, 12, 5]]);
}

#[test]
fn eltwise_values() {
    let shapes = [vec![3], vec![3]];
    let (a, b): (&[f32], &[f32]) = (&[1.0, -2.0, 3.0], &[2.0, 5.0, -1.0]);
    let sum = Eltwise::new(EltwiseOp::Sum(vec![1.0, -1.0]), &shapes).unwrap();
    assert_eq!(run(&sum, &[], &[a, b]).0[0], vec![-1.0, -7.0, 4.0]);
    let prod = Eltwise::new(EltwiseOp::Prod, &shapes).unwrap();
    assert_eq!(run(&prod, &[], &[a, b]).0[0], vec![2.0, -10.0, -3.0]);
    let max = Eltwise::new(EltwiseOp::Max, &shapes).unwrap();
    let (tops, mask) = run(&max, &[], &[a, b]);
    assert_eq!((tops[0].clone(), mask), (vec![2.0, 5.0, 3.0], vec![1.0, 1.0, 0.0]));
    assert!(Eltwise::new(EltwiseOp::Sum(vec![1.0]), &shapes).unwrap_err().contains("coeff"));
    assert!(Eltwise::new(EltwiseOp::Prod, &[vec![3], vec![4]]).unwrap_err().contains("differ"));
}

#[test]
fn softmax_power_prelu_scale_values() {
    let s = Softmax::new(1, &vec![1, 2, 2]).unwrap();
    // Along the channels, per position: (0, ln 3) → (1/4, 3/4); (1, 1) → (1/2, 1/2).
    assert_close(&run(&s, &[], &[&[0.0, 1.0, 3f32.ln(), 1.0]]).0[0], &[0.25, 0.5, 0.75, 0.5]);
    let p = Power::new(PowerConf { power: 2.0, scale: 2.0, shift: 1.0 }, &vec![2]);
    assert_close(&run(&p, &[], &[&[1.0, -1.0]]).0[0], &[9.0, 1.0]);
    let r = PRelu::new(false, Filler::Constant(0.25), &vec![1, 2, 2]).unwrap();
    assert_eq!(r.param_blobs()[0].shape, vec![2]);
    assert_close(&run(&r, &[0.25, 0.5], &[&[-2.0, 3.0, -2.0, -4.0]]).0[0], &[-0.5, 3.0, -1.0, -2.0]);
    let c = Scale::new(ScaleConf { bias_term: true, ..ScaleConf::default() }, &vec![1, 2, 2]).unwrap();
    assert_eq!(c.param_blobs().len(), 2);
    assert_eq!(c.param_blobs()[0].filler, Filler::Constant(1.0));
    assert_close(&run(&c, &[2.0, -1.0, 0.5, 0.0], &[&[1.0, 2.0, 3.0, 4.0]]).0[0], &[2.5, 4.5, -3.0, -4.0]);
    assert!(Scale::new(ScaleConf { num_axes: 3, ..ScaleConf::default() }, &vec![2, 3]).is_err());
}

#[test]
fn batch_norm_values_and_running_statistics() {
    // One channel, values 1 and 3 (two images): mean 2, variance 1.
    let bn = BatchNorm::new(BatchNormConf::for_phase(true), &vec![2, 1]).unwrap();
    let blobs: Vec<_> = bn.param_blobs().iter().map(|p| p.shape.clone()).collect();
    assert_eq!(blobs, vec![vec![1], vec![1], vec![1]]);
    assert!(bn.param_grad_is_update());
    let params = [10.0, 20.0, 5.0];
    let (tops, aux) = run(&bn, &params, &[&[1.0, 3.0]]);
    let s = 1.0 / (1.0f32 + 1e-5).sqrt();
    assert_close(&tops[0], &[-s, s]);
    // Backward writes the change Caffe's forward makes to its three blobs:
    // blob ← 0.999·blob + (mean, m/(m−1)·var, 1), with m = 2.
    let mut grad = vec![0.0; 3];
    let mut dx = vec![0.5, -0.5];
    bn.backward(Backward {
        params: &params,
        bottoms: &[&[]],
        tops: &[&tops[0]],
        top_diffs: &[],
        bottom_diffs: &mut [&mut dx],
        param_grad: &mut grad,
        aux: &aux,
        loss_weight: 1.0,
    });
    let keep = 0.999f32 - 1.0;
    assert_close(&grad, &[keep * 10.0 + 2.0, keep * 20.0 + 2.0, keep * 5.0 + 1.0]);
    // Global statistics: blob / factor, and no change to the blobs.
    let g = BatchNorm::new(BatchNormConf::for_phase(false), &vec![2, 1]).unwrap();
    let (tops, _) = run(&g, &[4.0, 8.0, 2.0], &[&[2.0, 4.0]]);
    let s = 1.0 / (4.0f32 + 1e-5).sqrt();
    assert_close(&tops[0], &[0.0, 2.0 * s]);
    // A zero factor (nothing accumulated yet) normalises by mean 0, variance 0, as Caffe does.
    let (tops, _) = run(&g, &[4.0, 8.0, 0.0], &[&[0.5, 1.0]]);
    assert_close(&tops[0], &[0.5 / 1e-5f32.sqrt(), 1.0 / 1e-5f32.sqrt()]);
    let bad = BatchNormConf { eps: 0.0, ..BatchNormConf::for_phase(true) };
    assert!(BatchNorm::new(bad, &vec![2, 1]).unwrap_err().contains("eps"));
}

fn spec(num_output: usize, kernel: (usize, usize), group: usize, dilation: (usize, usize)) -> ConvSpec {
    ConvSpec {
        num_output,
        kernel,
        stride: (1, 1),
        pad: (0, 0),
        dilation,
        group,
        bias_term: false,
        weight_filler: Filler::Constant(0.0),
        bias_filler: Filler::Constant(0.0),
    }
}

#[test]
fn grouped_and_dilated_convolution_values() {
    // Two groups of one channel: each output sees its own input channel only.
    let l = Conv::new(&spec(2, (1, 1), 2, (1, 1)), &vec![1, 2, 1, 2]).unwrap();
    assert_eq!(l.param_blobs()[0].shape, vec![2, 1, 1, 1]);
    assert_eq!(run(&l, &[3.0, -1.0], &[&[1.0, 2.0, 10.0, 20.0]]).0[0], vec![3.0, 6.0, -10.0, -20.0]);
    // A 1x3 kernel with dilation 2 over a row of 5 taps x0, x2, x4: one output.
    let l = Conv::new(&spec(1, (1, 3), 1, (1, 2)), &vec![1, 1, 1, 5]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![1, 1, 1, 1]]);
    assert_eq!(run(&l, &[1.0, 10.0, 100.0], &[&[1.0, 2.0, 3.0, 4.0, 5.0]]).0[0], vec![531.0]);
    assert!(Conv::new(&spec(3, (1, 1), 2, (1, 1)), &vec![1, 2, 1, 1]).unwrap_err().contains("group 2"));
    assert!(Conv::new(&spec(1, (1, 3), 1, (1, 3)), &vec![1, 1, 1, 5]).unwrap_err().contains("larger"));
}

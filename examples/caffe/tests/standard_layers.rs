//! Caffe's remaining standard layers (Slice, Crop, Deconvolution, Bias,
//! Tile, Reduction, ArgMax, Embed, MVN, SPP, Parameter, ContrastiveLoss,
//! HingeLoss, MultinomialLogisticLoss): forward values against Caffe's
//! semantics worked by hand, and backward against finite differences.

mod gradcheck;

use caffe_geeps::layers::argmax::ArgMax;
use caffe_geeps::layers::bias::Bias;
use caffe_geeps::layers::contrastive_loss::ContrastiveLoss;
use caffe_geeps::layers::conv::Conv;
use caffe_geeps::layers::crop::Crop;
use caffe_geeps::layers::deconv::Deconv;
use caffe_geeps::layers::embed::Embed;
use caffe_geeps::layers::hinge_loss::HingeLoss;
use caffe_geeps::layers::multinomial_logistic_loss::MultinomialLogisticLoss;
use caffe_geeps::layers::mvn::Mvn;
use caffe_geeps::layers::parameter::Parameter;
use caffe_geeps::layers::reduction::Reduction;
use caffe_geeps::layers::slice::Slice;
use caffe_geeps::layers::spp::Spp;
use caffe_geeps::layers::tile::Tile;
use caffe_geeps::layers::{count, Forward, Layer, Shape};
use caffe_geeps::proto::layer_conf::{ConvSpec, Filler, PoolMethod};
use caffe_geeps::proto::standard_conf::{
    ArgMaxConf, BiasConf, ContrastiveConf, EmbedConf, HingeNorm, MvnConf, ReductionConf, ReductionOp, SppConf,
};
use gradcheck::{check_built, check_layer, distinct, random, xavier};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Forward of `l` on `bottoms` (an elementwise layer gets the first in its top), with `params`.
fn run(l: &dyn Layer, params: &[f32], bottoms: &[&[f32]]) -> Vec<Vec<f32>> {
    let mut tops: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| vec![0.0; count(s)]).collect();
    let b: Vec<&[f32]> = if l.elementwise() {
        tops[0].copy_from_slice(bottoms[0]);
        Vec::new()
    } else {
        bottoms.to_vec()
    };
    let mut aux = vec![0.0; l.aux_len()];
    let mut t: Vec<&mut [f32]> = tops.iter_mut().map(|v| v.as_mut_slice()).collect();
    l.forward(Forward { params, bottoms: &b, tops: &mut t, aux: &mut aux, train: true, seed: 0 });
    tops
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

fn conv_spec(num_output: usize, kernel: (usize, usize), stride: (usize, usize), pad: (usize, usize)) -> ConvSpec {
    ConvSpec {
        num_output,
        kernel,
        stride,
        pad,
        dilation: (1, 1),
        group: 1,
        bias_term: true,
        weight_filler: xavier(),
        bias_filler: Filler::Constant(0.0),
    }
}

#[test]
fn slice_cuts_at_points_or_evenly() {
    let l = Slice::new(1, &[2], 2, &vec![2, 5]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 2], vec![2, 3]]);
    let tops = run(&l, &[], &[&iota(10)]);
    assert_eq!(tops, vec![vec![0.0, 1.0, 5.0, 6.0], vec![2.0, 3.0, 4.0, 7.0, 8.0, 9.0]]);
    // mnist_siamese's pair: channels 2 into two images.
    let even = Slice::new(1, &[], 2, &vec![3, 2, 2, 2]).unwrap();
    assert_eq!(even.top_shapes(), vec![vec![3, 1, 2, 2]; 2]);
    let shapes = [vec![3, 6, 2]];
    check_built(&Slice::new(1, &[1, 4], 3, &shapes[0]).unwrap(), &shapes);
    check_built(&Slice::new(-1, &[], 2, &shapes[0]).unwrap(), &shapes);
    check_built(&Slice::new(0, &[2], 2, &shapes[0]).unwrap(), &shapes);
    assert!(Slice::new(1, &[], 4, &shapes[0]).err().unwrap().contains("evenly"));
    assert!(Slice::new(1, &[3, 6], 3, &shapes[0]).err().unwrap().contains("must rise"));
}

#[test]
fn crop_takes_the_references_sizes_at_the_offsets() {
    let l = Crop::new(2, &[1], &[vec![1, 1, 4, 4], vec![1, 1, 2, 2]]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![1, 1, 2, 2]]);
    assert_eq!(run(&l, &[], &[&iota(16), &[0.0; 4]])[0], [5.0, 6.0, 9.0, 10.0]);
    let per_axis = Crop::new(1, &[1, 0, 2], &[vec![2, 3, 3, 5], vec![7, 2, 2, 3]]).unwrap();
    assert_eq!(per_axis.top_shapes(), vec![vec![2, 2, 2, 3]]);
    let y = run(&per_axis, &[], &[&iota(90), &[0.0; 84]]);
    // Item 0, channel 1, row 0, columns 2..5: 15 + 2 = 17, 18, 19.
    assert_eq!(y[0][..3], [17.0, 18.0, 19.0]);
    check_built(&per_axis, &[vec![2, 3, 3, 5], vec![7, 2, 2, 3]]);
    check_built(&Crop::new(-1, &[], &[vec![2, 5], vec![2, 3]]).unwrap(), &[vec![2, 5], vec![2, 3]]);
    let err = Crop::new(2, &[3], &[vec![1, 1, 4, 4], vec![1, 1, 2, 2]]).err().unwrap();
    assert!(err.contains("runs past"), "{err}");
}

#[test]
fn deconvolution_is_the_adjoint_of_convolution() {
    // One input pixel per 2x2 block: stride 2, kernel 2 tiles the kernel scaled by each pixel.
    let l = Deconv::new(&conv_spec(1, (2, 2), (2, 2), (0, 0)), &vec![1, 1, 2, 2]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![1, 1, 4, 4]]);
    let w = [1.0, 2.0, 3.0, 4.0, 0.5];
    let y = run(&l, &w, &[&[1.0, 10.0, 100.0, 1000.0]])[0].clone();
    let want = [1.5, 2.5, 10.5, 20.5, 3.5, 4.5, 30.5, 40.5, 100.5, 200.5, 1000.5, 2000.5, 300.5, 400.5, 3000.5, 4000.5];
    assert_eq!(y, want);
    // <deconv_W(x), y> = <x, conv_W(y)> with the same weights, no bias: every geometry.
    let mut rng = StdRng::seed_from_u64(3);
    for (k, s, p, group) in [((3, 3), (1, 1), (1, 1), 1), ((4, 3), (2, 3), (1, 0), 1), ((3, 2), (2, 1), (0, 1), 2)] {
        let (cin, cout) = (4, 6);
        let spec = ConvSpec { group, bias_term: false, ..conv_spec(cout, k, s, p) };
        let x_shape = vec![2, cin, 3, 4];
        let d = Deconv::new(&spec, &x_shape).unwrap();
        let top = d.top_shapes()[0].clone();
        let conv = Conv::new(&ConvSpec { num_output: cin, ..spec.clone() }, &top).unwrap();
        assert_eq!(conv.top_shapes()[0], x_shape, "the convolution maps the top back to the bottom's shape");
        assert_eq!(d.param_blobs()[0].shape, conv.param_blobs()[0].shape);
        let w = random(&mut rng, count(&d.param_blobs()[0].shape));
        let x = random(&mut rng, count(&x_shape));
        let yv = random(&mut rng, count(&top));
        let lhs: f64 = run(&d, &w, &[&x])[0].iter().zip(&yv).map(|(a, b)| f64::from(a * b)).sum();
        let rhs: f64 = run(&conv, &w, &[&yv])[0].iter().zip(&x).map(|(a, b)| f64::from(a * b)).sum();
        assert!((lhs - rhs).abs() < 1e-3 * lhs.abs().max(1.0), "{lhs} vs {rhs}");
    }
    check_built(&Deconv::new(&conv_spec(3, (3, 2), (2, 1), (1, 0)), &vec![2, 2, 3, 3]).unwrap(), &[vec![2, 2, 3, 3]]);
    let grouped = ConvSpec { group: 2, dilation: (2, 1), ..conv_spec(4, (2, 2), (1, 2), (0, 1)) };
    check_built(&Deconv::new(&grouped, &vec![5, 4, 2, 3]).unwrap(), &[vec![5, 4, 2, 3]]);
}

#[test]
fn bias_learned_or_from_a_bottom() {
    let l = Bias::new(BiasConf::default(), &[vec![2, 2, 2]]).unwrap();
    assert_eq!(l.param_blobs()[0].shape, vec![2]);
    assert_eq!(run(&l, &[10.0, 20.0], &[&iota(8)])[0], [10.0, 11.0, 22.0, 23.0, 14.0, 15.0, 26.0, 27.0]);
    check_built(&l, &[vec![2, 2, 2]]);
    let all = BiasConf { axis: 0, num_axes: -1, ..BiasConf::default() };
    check_built(&Bias::new(all, &[vec![3, 2]]).unwrap(), &[vec![3, 2]]);
    let scalar = BiasConf { num_axes: 0, ..BiasConf::default() };
    check_built(&Bias::new(scalar, &[vec![3, 2]]).unwrap(), &[vec![3, 2]]);
    let two = [vec![2, 3, 4], vec![3, 4]];
    let l = Bias::new(BiasConf::default(), &two).unwrap();
    assert!(l.param_blobs().is_empty());
    check_built(&l, &two);
    check_built(&Bias::new(BiasConf::default(), &[vec![2, 3], vec![]]).unwrap(), &[vec![2, 3], vec![]]);
    assert!(Bias::new(BiasConf::default(), &[vec![2, 3], vec![4]]).is_err());
}

#[test]
fn tile_repeats_along_the_axis() {
    let l = Tile::new(1, 2, &vec![2, 3]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 6]]);
    assert_eq!(run(&l, &[], &[&iota(6)])[0], [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);
    check_built(&l, &[vec![2, 3]]);
    check_built(&Tile::new(0, 3, &vec![2, 2, 2]).unwrap(), &[vec![2, 2, 2]]);
    check_built(&Tile::new(-1, 2, &vec![2, 2, 3]).unwrap(), &[vec![2, 2, 3]]);
}

#[test]
fn reduction_sum_asum_sumsq_mean() {
    let x = [1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
    let r = |op, axis, coeff| {
        let l = Reduction::new(ReductionConf { op, axis, coeff }, &vec![2, 3]).unwrap();
        (l.top_shapes()[0].clone(), run(&l, &[], &[&x])[0].clone())
    };
    assert_eq!(r(ReductionOp::Sum, 0, 1.0), (vec![], vec![-3.0]));
    assert_eq!(r(ReductionOp::Sum, 1, 2.0), (vec![2], vec![4.0, -10.0]));
    assert_eq!(r(ReductionOp::Asum, 1, 1.0).1, [6.0, 15.0]);
    assert_eq!(r(ReductionOp::Sumsq, -1, 1.0).1, [14.0, 77.0]);
    assert_eq!(r(ReductionOp::Mean, 1, 3.0).1, [2.0, -5.0]);
    for op in [ReductionOp::Sum, ReductionOp::Asum, ReductionOp::Sumsq, ReductionOp::Mean] {
        for axis in [0, 1, 2] {
            let shape = vec![2, 3, 2];
            check_built(&Reduction::new(ReductionConf { op, axis, coeff: -1.5 }, &shape).unwrap(), &[shape]);
        }
    }
}

#[test]
fn argmax_indexes_values_and_ties() {
    let x = [0.1, 0.9, 0.5, 0.9, 0.3, 0.2, 0.7, 0.1];
    let conf = |out_max_val, top_k, axis| ArgMaxConf { out_max_val, top_k, axis };
    let l = ArgMax::new(conf(false, 1, None), &vec![2, 4]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 1, 1]]);
    assert!(!l.has_backward());
    // Item 0's tie (0.9 at 1 and 3): the larger index, as Caffe sorts pairs.
    assert_eq!(run(&l, &[], &[&x])[0], [3.0, 2.0]);
    let l = ArgMax::new(conf(true, 2, None), &vec![2, 4]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 2, 2]]);
    assert_eq!(run(&l, &[], &[&x])[0], [3.0, 1.0, 0.9, 0.9, 2.0, 0.0, 0.7, 0.3]);
    // Along axis 0 of a 2x4: per column.
    let l = ArgMax::new(conf(false, 1, Some(0)), &vec![2, 4]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![1, 4]]);
    assert_eq!(run(&l, &[], &[&x])[0], [1.0, 0.0, 1.0, 0.0]);
    let l = ArgMax::new(conf(true, 1, Some(-1)), &vec![2, 4]).unwrap();
    assert_eq!(run(&l, &[], &[&x])[0], [0.9, 0.7]);
    assert!(ArgMax::new(conf(false, 5, None), &vec![2, 4]).is_err());
}

#[test]
fn embed_looks_up_rows() {
    let conf = EmbedConf {
        num_output: 2,
        input_dim: 3,
        bias_term: true,
        weight_filler: xavier(),
        bias_filler: Filler::Constant(0.0),
    };
    let l = Embed::new(conf.clone(), &vec![2, 2]).unwrap();
    assert_eq!(l.top_shapes(), vec![vec![2, 2, 2]]);
    let params = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.5, -0.5];
    assert_eq!(run(&l, &params, &[&[2.0, 0.0, 0.0, 1.0]])[0], [5.5, 5.5, 1.5, 1.5, 1.5, 1.5, 3.5, 3.5]);
    // Gradients of the table and bias (indexes repeat, so rows accumulate).
    check_layer(&l, vec![vec![2.0, 0.0, 0.0, 1.0]], 0, None);
    let plain = Embed::new(EmbedConf { bias_term: false, ..conf }, &vec![5]).unwrap();
    check_layer(&plain, vec![vec![1.0, 1.0, 2.0, 0.0, 1.0]], 0, None);
}

#[test]
fn mvn_normalises_each_row() {
    for (normalize_variance, across_channels) in [(true, false), (false, false), (true, true), (false, true)] {
        let shape = vec![2, 3, 2, 2];
        let l = Mvn::new(MvnConf { normalize_variance, across_channels, ..MvnConf::default() }, &shape).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let x: Vec<f32> = (0..24).map(|_| rng.gen_range(-3.0..5.0f32)).collect();
        let y = run(&l, &[], &[&x])[0].clone();
        let row = if across_channels { 12 } else { 4 };
        for r in y.chunks(row) {
            let mean = r.iter().sum::<f32>() / row as f32;
            let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / row as f32;
            assert!(mean.abs() < 1e-5, "{mean}");
            if normalize_variance {
                assert!((var - 1.0).abs() < 1e-4, "{var}");
            }
        }
        check_built(&l, &[shape]);
    }
}

#[test]
fn spp_pools_a_pyramid() {
    let shape = vec![2, 3, 8, 6];
    for method in [PoolMethod::Max, PoolMethod::Ave] {
        let l = Spp::new(SppConf { pyramid_height: 3, method }, &shape).unwrap();
        // 1 + 4 + 16 bins per channel.
        assert_eq!(l.top_shapes(), vec![vec![2, 63]]);
        let mut rng = StdRng::seed_from_u64(2);
        let x = distinct(&mut rng, count(&shape));
        let y = run(&l, &[], &[&x])[0].clone();
        // Level 0 is the whole plane: its max or mean.
        let plane = &x[48..96];
        let want = match method {
            PoolMethod::Max => plane.iter().cloned().fold(f32::MIN, f32::max),
            PoolMethod::Ave => plane.iter().sum::<f32>() / 48.0,
        };
        assert!((y[1] - want).abs() < 1e-5, "{} vs {want}", y[1]);
        check_layer(&l, vec![x], 1, None);
    }
    let one = Spp::new(SppConf { pyramid_height: 1, method: PoolMethod::Max }, &shape).unwrap();
    assert_eq!(one.top_shapes(), vec![vec![2, 3, 1, 1]]);
    let err = Spp::new(SppConf { pyramid_height: 4, method: PoolMethod::Max }, &vec![1, 1, 5, 5]).err().unwrap();
    assert!(err.contains("pyramid_height"), "{err}");
}

#[test]
fn parameter_is_its_blob() {
    let shape: Shape = vec![2, 3];
    let l = Parameter::new(&shape, &[]).unwrap();
    assert_eq!(run(&l, &iota(6), &[])[0], iota(6));
    check_built(&l, &[]);
    assert!(Parameter::new(&shape, &[vec![1]]).is_err());
}

#[test]
fn contrastive_loss_values_and_gradients() {
    let shapes = [vec![3, 2], vec![3, 2], vec![3, 1, 1, 1]];
    let a = [0.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    let b = [3.0, 4.0, 1.0, 1.5, 0.3, 0.4];
    let y = [1.0, 0.0, 0.0];
    let l = ContrastiveLoss::new(ContrastiveConf::default(), &shapes).unwrap();
    // d = 5 (similar: 25), 0.5 (dissimilar: (1 − 0.5)² = 0.25), 0.5 (0.25); / 2N.
    let loss = run(&l, &[], &[&a, &b, &y])[0][0];
    assert!((loss - 25.5 / 6.0).abs() < 1e-5, "{loss}");
    let legacy =
        ContrastiveLoss::new(ContrastiveConf { legacy_version: true, ..ContrastiveConf::default() }, &shapes).unwrap();
    // Dissimilar: max(1 − d², 0) = 0.75 each.
    let loss = run(&legacy, &[], &[&a, &b, &y])[0][0];
    assert!((loss - 26.5 / 6.0).abs() < 1e-5, "{loss}");
    let mut rng = StdRng::seed_from_u64(8);
    let shapes = [vec![6, 3], vec![6, 3], vec![6]];
    let sim = vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0];
    for conf in [
        ContrastiveConf { margin: 1.5, legacy_version: false },
        ContrastiveConf { margin: 20.0, legacy_version: true },
        ContrastiveConf { margin: 0.01, legacy_version: true },
    ] {
        let l = ContrastiveLoss::new(conf, &shapes).unwrap();
        let bottoms = vec![random(&mut rng, 18), random(&mut rng, 18), sim.clone()];
        check_layer(&l, bottoms, 2, None);
    }
}

#[test]
fn hinge_loss_l1_and_l2() {
    let shapes = [vec![2, 3], vec![2]];
    let x = [0.5, -0.2, 2.0, -3.0, 0.1, 0.4];
    let labels = [0.0, 2.0];
    // Item 0: 1 − 0.5, 1 − 0.2, 1 + 2; item 1: 0, 1.1, 1 − 0.4.
    let m = [0.5f32, 0.8, 3.0, 0.0, 1.1, 0.6];
    let l1 = HingeLoss::new(HingeNorm::L1, &shapes).unwrap();
    let loss = run(&l1, &[], &[&x, &labels])[0][0];
    assert!((loss - m.iter().sum::<f32>() / 2.0).abs() < 1e-5, "{loss}");
    let l2 = HingeLoss::new(HingeNorm::L2, &shapes).unwrap();
    let loss = run(&l2, &[], &[&x, &labels])[0][0];
    assert!((loss - m.iter().map(|v| v * v).sum::<f32>() / 2.0).abs() < 1e-5, "{loss}");
    // Scores inside the hinge or well outside it: no kink within the step.
    let mut rng = StdRng::seed_from_u64(4);
    let mut scores: Vec<f32> = random(&mut rng, 20).iter().map(|v| v * 0.5).collect();
    scores[3] = 3.0;
    scores[7] = -2.5;
    let labels: Vec<f32> = (0..4).map(|i| (i % 5) as f32).collect();
    for norm in [HingeNorm::L1, HingeNorm::L2] {
        let l = HingeLoss::new(norm, &[vec![4, 5], vec![4]]).unwrap();
        check_layer(&l, vec![scores.clone(), labels.clone()], 1, None);
    }
}

#[test]
fn multinomial_logistic_loss_of_probabilities() {
    let p = [0.2, 0.5, 0.3, 0.9, 0.05, 0.05];
    let labels = [1.0, 0.0];
    let l = MultinomialLogisticLoss::new(&[vec![2, 3], vec![2]]).unwrap();
    let loss = run(&l, &[], &[&p, &labels])[0][0];
    let want = -(0.5f32.ln() + 0.9f32.ln()) / 2.0;
    assert!((loss - want).abs() < 1e-6, "{loss} vs {want}");
    let mut rng = StdRng::seed_from_u64(6);
    let probs: Vec<f32> = (0..15).map(|_| rng.gen_range(0.2..1.0f32)).collect();
    let l = MultinomialLogisticLoss::new(&[vec![3, 5], vec![3]]).unwrap();
    check_layer(&l, vec![probs, vec![4.0, 0.0, 2.0]], 1, None);
}

#[test]
fn infogain_loss_with_identity_is_softmax_loss() {
    use caffe_geeps::layers::infogain_loss::InfogainLoss;
    use caffe_geeps::layers::spec::LossNorm;
    let x = [1.0, 2.0, 0.5, -1.0, 0.0, 3.0];
    let labels = [1.0, 2.0];
    let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let l = InfogainLoss::new(1, LossNorm::Count, Some(&eye), &[vec![2, 3], vec![2]]).unwrap();
    let loss = run(&l, &[], &[&x, &labels])[0][0];
    let lse = |r: &[f32]| r.iter().map(|v| v.exp()).sum::<f32>().ln();
    let want = ((lse(&x[..3]) - 2.0) + (lse(&x[3..]) - 3.0)) / 2.0;
    assert!((loss - want).abs() < 1e-5, "{loss} vs {want}");
    // H as the third bottom, classes along axis 1 of a 4-D blob, every normaliser.
    let mut rng = StdRng::seed_from_u64(11);
    let h: Vec<f32> = (0..9).map(|_| rng.gen_range(0.0..2.0f32)).collect();
    let shapes = [vec![2, 3, 2, 2], vec![2, 1, 2, 2], vec![3, 3]];
    for norm in [LossNorm::Count, LossNorm::Batch, LossNorm::None] {
        let l = InfogainLoss::new(1, norm, None, &shapes).unwrap();
        let labels: Vec<f32> = (0..8).map(|i| (i % 3) as f32).collect();
        check_layer(&l, vec![random(&mut rng, 24), labels.clone(), h.clone()], 1, None);
        let from_matrix = InfogainLoss::new(1, norm, Some(&h), &shapes[..2]).unwrap();
        check_layer(&from_matrix, vec![random(&mut rng, 24), labels], 1, None);
    }
    assert!(InfogainLoss::new(1, LossNorm::Count, None, &shapes[..2]).err().unwrap().contains("matrix"));
    assert!(InfogainLoss::new(1, LossNorm::Count, Some(&h[..4]), &shapes[..2]).is_err());
}

//! Caffe's standard layers added after the first GPU set (Crop,
//! Deconvolution, Bias, Tile, Reduction, Embed, MVN, SPP, Parameter, the
//! Contrastive, Hinge, Infogain, MultinomialLogistic, Euclidean and
//! SigmoidCrossEntropy losses, AbsVal, BNLL, Log, Threshold, Exp and ELU)
//! on the GPU against their CPU code (`gpu_compare`), on shapes that reach
//! their edge cases: several images and channel groups, every axis choice,
//! bottoms and tops without a gradient, labels at the ends of the class
//! range, probabilities under the log floor. Layers that only copy or add
//! in the CPU's order give its bits. Each layer must report GPU code (so
//! the trainer no longer stages it through host memory); ArgMax, which has
//! none in Caffe either, is the one that stays staged. Runs on CUDA device
//! 0 — the emulated driver here — and is skipped without one unless
//! GEEPS_REQUIRE_CUDA=1.

mod gpu_compare;

use caffe_geeps::layers::spec::{LayerSpec, LossNorm, NeuronFn};
use caffe_geeps::layers::{self, count, Layer, Shape};
use caffe_geeps::proto::layer_conf::{ConvSpec, Filler, PoolMethod};
use caffe_geeps::proto::net::LayerKind;
use caffe_geeps::proto::standard_conf::{
    ArgMaxConf, BiasConf, ContrastiveConf, EmbedConf, HingeNorm, InfogainConf, MvnConf, ReductionConf, ReductionOp,
    SppConf,
};
use gpu_compare::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn spec(s: LayerSpec) -> LayerKind {
    LayerKind::Spec(s)
}

fn one(kind: LayerSpec, shape: &Shape, rng: &mut StdRng) -> Case {
    build(spec(kind), std::slice::from_ref(shape), true, rng)
}

/// Integer labels below `classes`, the first and last class among them.
fn labels(rng: &mut StdRng, n: usize, classes: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i {
            0 => 0.0,
            1 => (classes - 1) as f32,
            _ => rng.gen_range(0..classes) as f32,
        })
        .collect()
}

#[test]
fn crop_matches_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("crop_matches_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(21);
    for (axis, offsets, a, r) in [
        (2, vec![1, 2], vec![2, 3, 9, 11], vec![2, 3, 5, 6]),
        (1, vec![1], vec![3, 4, 6, 7], vec![3, 2, 4, 5]),
        (0, vec![1, 0, 2, 3], vec![4, 3, 7, 8], vec![2, 3, 4, 4]),
        (-1, vec![], vec![2, 3, 5, 9], vec![2, 3, 5, 4]),
        // Nothing cut: the crop is a copy.
        (1, vec![0], vec![2, 3, 4], vec![2, 3, 4]),
        // Five axes, every one cut.
        (0, vec![1], vec![3, 3, 4, 3, 5], vec![2, 2, 3, 2, 4]),
    ] {
        let kind = LayerSpec::Crop { axis, offsets: offsets.clone() };
        let case = build(spec(kind.clone()), &[a.clone(), r.clone()], true, &mut rng);
        exact(&gpu, &format!("crop axis {axis} at {offsets:?} {a:?} to {r:?}"), case);
        let mut case = build(spec(kind), &[a.clone(), r.clone()], true, &mut rng);
        case.no_top_gradient = vec![0];
        exact(&gpu, &format!("crop axis {axis} {a:?}, no top gradient"), case);
    }
}

#[test]
fn crop_of_more_than_six_cut_axes_stays_staged() {
    let mut rng = StdRng::seed_from_u64(22);
    let (a, r) = (vec![3; 7], vec![2; 7]);
    let case = build(spec(LayerSpec::Crop { axis: 0, offsets: vec![1] }), &[a.clone(), r], true, &mut rng);
    assert!(!case.layer.on_gpu(), "seven cut axes exceed the kernels' window");
    // Axes the window does not cut merge: seven axes, three cut.
    let r = vec![3, 3, 3, 3, 2, 2, 2];
    let case = build(spec(LayerSpec::Crop { axis: 4, offsets: vec![1] }), &[a, r], true, &mut rng);
    assert!(case.layer.on_gpu());
}

fn deconv(num_output: usize, kernel: usize, stride: usize, pad: usize, group: usize, bias_term: bool) -> ConvSpec {
    ConvSpec {
        num_output,
        kernel: (kernel, kernel),
        stride: (stride, stride),
        pad: (pad, pad),
        dilation: (1, 1),
        group,
        bias_term,
        weight_filler: Filler::Constant(0.0),
        bias_filler: Filler::Constant(0.0),
    }
}

#[test]
fn deconvolution_matches_the_cpu() {
    let Some(gpu) = gpu("deconvolution_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(23);
    let dilated = ConvSpec { dilation: (2, 1), kernel: (3, 2), stride: (2, 1), ..deconv(4, 3, 2, 1, 1, true) };
    for (c, shape) in [
        (deconv(5, 4, 2, 1, 1, true), vec![3, 2, 5, 4]),
        (deconv(6, 3, 1, 0, 3, false), vec![2, 3, 4, 5]),
        (deconv(4, 2, 2, 0, 2, true), vec![4, 6, 3, 3]),
        // Depthwise: more groups than images.
        (deconv(4, 3, 2, 1, 4, false), vec![1, 4, 3, 3]),
        // A 1×1 kernel: the bottom gradient's columns are the top gradient itself.
        (deconv(6, 1, 1, 0, 2, true), vec![3, 4, 5, 3]),
        (dilated, vec![2, 3, 4, 6]),
    ] {
        let what = format!("deconvolution {} group {} {shape:?}", c.num_output, c.group);
        compare(&gpu, &what, one(LayerSpec::Deconvolution(c.clone()), &shape, &mut rng));
        let mut case = one(LayerSpec::Deconvolution(c), &shape, &mut rng);
        case.no_gradient = vec![0];
        compare(&gpu, &format!("{what}, weights only"), case);
    }
    // Runs of 2, 2 and 1 images under a small scratch bound.
    gpu.set_scratch_bound(2048);
    let case = one(LayerSpec::Deconvolution(deconv(3, 3, 2, 1, 1, true)), &vec![5, 2, 4, 4], &mut rng);
    compare(&gpu, "deconvolution in runs of images", case);
    gpu.set_scratch_bound(caffe_geeps::gpu::DEFAULT_SCRATCH_BOUND);
}

#[test]
fn bias_matches_the_cpu() {
    let Some(gpu) = gpu("bias_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(24);
    let x = vec![3, 5, 7, 11];
    // A learned bias (in place), along the axes num_axes picks.
    for (axis, num_axes) in [(1, 1), (1, 2), (0, 1), (1, -1), (-1, 1), (2, 0)] {
        let conf = BiasConf { axis, num_axes, filler: Filler::Constant(0.0) };
        compare(
            &gpu,
            &format!("learned bias axis {axis} num_axes {num_axes}"),
            one(LayerSpec::Bias(conf), &x, &mut rng),
        );
    }
    // The bias as a second bottom, a scalar one included.
    for (axis, b) in [(1, vec![5, 7]), (0, vec![3]), (-1, vec![11]), (1, vec![])] {
        let conf = BiasConf { axis, ..BiasConf::default() };
        let shapes = [x.clone(), b.clone()];
        compare(
            &gpu,
            &format!("bias bottom {b:?} at axis {axis}"),
            build(spec(LayerSpec::Bias(conf.clone())), &shapes, true, &mut rng),
        );
        let mut case = build(spec(LayerSpec::Bias(conf)), &shapes, true, &mut rng);
        case.no_gradient = vec![1];
        compare(&gpu, &format!("bias bottom {b:?}, no gradient to it"), case);
    }
}

#[test]
fn tile_and_parameter_match_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("tile_and_parameter_match_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(25);
    let shape = vec![2, 3, 5, 4];
    for (axis, tiles) in [(0, 3), (1, 2), (-1, 4), (2, 1)] {
        let kind = LayerSpec::Tile { axis, tiles };
        exact(&gpu, &format!("tile axis {axis} × {tiles}"), one(kind.clone(), &shape, &mut rng));
        let mut case = one(kind, &shape, &mut rng);
        case.no_top_gradient = vec![0];
        exact(&gpu, &format!("tile axis {axis}, no top gradient"), case);
    }
    for shape in [vec![7], vec![3, 5, 2]] {
        let kind = LayerSpec::Parameter { shape: shape.clone() };
        exact(&gpu, &format!("parameter {shape:?}"), build(spec(kind.clone()), &[], true, &mut rng));
        let mut case = build(spec(kind), &[], true, &mut rng);
        case.no_top_gradient = vec![0];
        exact(&gpu, &format!("parameter {shape:?}, no top gradient"), case);
    }
}

#[test]
fn reduction_matches_the_cpu() {
    let Some(gpu) = gpu("reduction_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(26);
    // 385 values per row at axis 1: more than a block of threads.
    let shape = vec![3, 5, 7, 11];
    for op in [ReductionOp::Sum, ReductionOp::Asum, ReductionOp::Sumsq, ReductionOp::Mean] {
        for (axis, coeff) in [(0, 1.0), (1, -0.5), (-1, 2.0), (3, 1.0)] {
            let conf = ReductionConf { op, axis, coeff };
            compare(
                &gpu,
                &format!("reduction {op:?} axis {axis} coeff {coeff}"),
                one(LayerSpec::Reduction(conf), &shape, &mut rng),
            );
        }
        let conf = ReductionConf { op, axis: 1, coeff: 1.0 };
        let mut case = one(LayerSpec::Reduction(conf), &shape, &mut rng);
        case.no_top_gradient = vec![0];
        compare(&gpu, &format!("reduction {op:?}, no top gradient"), case);
    }
}

#[test]
fn embed_matches_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("embed_matches_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(27);
    for (input_dim, num_output, bias_term, shape) in
        [(10, 7, true, vec![4, 6]), (3, 300, false, vec![9]), (50, 5, true, vec![2, 3, 4])]
    {
        let conf = EmbedConf {
            num_output,
            input_dim,
            bias_term,
            weight_filler: Filler::Constant(0.0),
            bias_filler: Filler::Constant(0.0),
        };
        let mut case = one(LayerSpec::Embed(conf), &shape, &mut rng);
        // Indexes with repeats (their rows' gradients add up), the first and last row among them.
        case.bottoms[0] = labels(&mut rng, count(&shape), input_dim);
        exact(&gpu, &format!("embed {input_dim}×{num_output} bias {bias_term} {shape:?}"), case);
    }
}

#[test]
fn mvn_matches_the_cpu() {
    let Some(gpu) = gpu("mvn_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(28);
    for shape in [vec![2, 3, 11, 13], vec![5, 4, 3], vec![3, 2]] {
        for (normalize_variance, across_channels) in [(true, false), (false, false), (true, true), (false, true)] {
            let conf = MvnConf { normalize_variance, across_channels, eps: 1e-9 };
            let what = format!("MVN variance {normalize_variance} across {across_channels} {shape:?}");
            compare(&gpu, &what, one(LayerSpec::Mvn(conf), &shape, &mut rng));
        }
    }
    let mut case = one(LayerSpec::Mvn(MvnConf::default()), &vec![2, 3, 4, 5], &mut rng);
    case.no_top_gradient = vec![0];
    compare(&gpu, "MVN, no top gradient", case);
}

#[test]
fn spp_matches_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("spp_matches_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(29);
    for method in [PoolMethod::Max, PoolMethod::Ave] {
        for (pyramid_height, shape) in [(1, vec![2, 3, 7, 5]), (2, vec![3, 2, 9, 8]), (3, vec![2, 3, 13, 11])] {
            let conf = SppConf { pyramid_height, method };
            exact(
                &gpu,
                &format!("SPP {method:?} height {pyramid_height} {shape:?}"),
                one(LayerSpec::Spp(conf), &shape, &mut rng),
            );
        }
    }
}

#[test]
fn contrastive_loss_matches_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("contrastive_loss_matches_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(30);
    for legacy_version in [false, true] {
        // Distances around the margin: dissimilar pairs on both sides of it.
        for (margin, shape) in [(1.0, vec![16, 3]), (4.0, vec![9, 2, 2, 3])] {
            let conf = ContrastiveConf { margin, legacy_version };
            let y = vec![shape[0]];
            let mut case =
                build(spec(LayerSpec::ContrastiveLoss(conf)), &[shape.clone(), shape.clone(), y], true, &mut rng);
            case.bottoms[2] = (0..shape[0]).map(|i| (i % 3 == 0) as u8 as f32).collect();
            // One pair identical: d = 0, Caffe's 1e-4 guard.
            let dim = count(&shape) / shape[0];
            let same = case.bottoms[0][dim..2 * dim].to_vec();
            case.bottoms[1][dim..2 * dim].copy_from_slice(&same);
            let what = format!("contrastive margin {margin} legacy {legacy_version} {shape:?}");
            exact(&gpu, &what, case);
        }
    }
    let shape = vec![6, 4];
    let mut case = build(
        spec(LayerSpec::ContrastiveLoss(ContrastiveConf::default())),
        &[shape.clone(), shape, vec![6]],
        true,
        &mut rng,
    );
    case.bottoms[2] = vec![1.0, 0.0, 2.0, 0.0, 0.0, 1.0];
    case.no_gradient = vec![0];
    exact(&gpu, "contrastive, no gradient to a", case);
}

#[test]
fn hinge_and_multinomial_logistic_losses_match_the_cpu_bit_for_bit() {
    let Some(gpu) = gpu("hinge_and_multinomial_logistic_losses_match_the_cpu_bit_for_bit") else { return };
    let mut rng = StdRng::seed_from_u64(31);
    for norm in [HingeNorm::L1, HingeNorm::L2] {
        for (num, classes) in [(7, 5), (300, 2), (3, 40)] {
            let mut case = build(spec(LayerSpec::HingeLoss(norm)), &[vec![num, classes], vec![num]], true, &mut rng);
            // Scores of ±2 sit outside the hinge: a zero gradient there.
            case.bottoms[0].iter_mut().step_by(3).for_each(|v| *v *= 2.0);
            case.bottoms[1] = labels(&mut rng, num, classes);
            exact(&gpu, &format!("hinge {norm:?} {num}×{classes}"), case);
        }
    }
    for (num, classes) in [(7, 5), (130, 3)] {
        let mut case =
            build(spec(LayerSpec::MultinomialLogisticLoss), &[vec![num, classes], vec![num]], true, &mut rng);
        case.bottoms[0] = (0..num * classes).map(|_| rng.gen_range(0.01..1.0f32)).collect();
        case.bottoms[1] = labels(&mut rng, num, classes);
        // A zero probability at a label: the 1e-20 floor.
        let at = 2 * classes + case.bottoms[1][2] as usize;
        case.bottoms[0][at] = 0.0;
        exact(&gpu, &format!("multinomial logistic {num}×{classes}"), case);
    }
    let mut case = build(spec(LayerSpec::MultinomialLogisticLoss), &[vec![4, 3], vec![4]], true, &mut rng);
    case.bottoms[0] = (0..12).map(|_| rng.gen_range(0.01..1.0f32)).collect();
    case.bottoms[1] = vec![0.0, 2.0, 1.0, 2.0];
    case.no_gradient = vec![0, 1];
    exact(&gpu, "multinomial logistic, no gradient", case);
}

#[test]
fn infogain_loss_matches_the_cpu() {
    let Some(gpu) = gpu("infogain_loss_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(32);
    for (axis, shape, norm) in [
        (1, vec![6, 4], LossNorm::Batch),
        (1, vec![2, 5, 3, 4], LossNorm::Count),
        (-1, vec![3, 2, 6], LossNorm::None),
        (0, vec![3, 7], LossNorm::Count),
    ] {
        let a = if axis < 0 { shape.len() - 1 } else { axis as usize };
        let classes = shape[a];
        let positions = count(&shape) / classes;
        let h: Vec<f32> = (0..classes * classes).map(|_| rng.gen_range(0.0..2.0f32)).collect();
        for as_bottom in [true, false] {
            let conf = InfogainConf {
                axis,
                norm,
                source: None,
                base_dir: Default::default(),
                matrix: if as_bottom { Vec::new() } else { h.clone() },
            };
            let mut shapes = vec![shape.clone(), vec![positions]];
            if as_bottom {
                shapes.push(vec![classes, classes]);
            }
            let mut case = build(spec(LayerSpec::InfogainLoss(conf)), &shapes, true, &mut rng);
            case.bottoms[1] = labels(&mut rng, positions, classes);
            if as_bottom {
                case.bottoms[2] = h.clone();
            }
            // Labels and H get a zero gradient, which the GPU must write too.
            let what = format!("infogain axis {axis} {shape:?} {norm:?} H as bottom {as_bottom}");
            compare(&gpu, &what, case);
        }
    }
}

#[test]
fn pointwise_layers_match_the_cpu() {
    let Some(gpu) = gpu("pointwise_layers_match_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(33);
    // 1000 values: several blocks, the last partial; 7: less than a warp.
    for shape in [vec![4, 250], vec![7]] {
        for f in [NeuronFn::AbsVal, NeuronFn::Threshold(0.25), NeuronFn::Threshold(0.0)] {
            let mut case = one(LayerSpec::Neuron(f), &shape, &mut rng);
            case.bottoms[0][0] = 0.0;
            exact(&gpu, &format!("{f:?} {shape:?}"), case);
        }
        for f in [
            NeuronFn::Bnll,
            NeuronFn::Log { base: -1.0, scale: 1.0, shift: 1.5 },
            NeuronFn::Log { base: 10.0, scale: 0.5, shift: 2.0 },
            NeuronFn::Exp { base: -1.0, scale: 1.0, shift: 0.0 },
            NeuronFn::Exp { base: 2.0, scale: -0.5, shift: 0.25 },
            NeuronFn::Elu(1.0),
            NeuronFn::Elu(0.5),
        ] {
            compare(&gpu, &format!("{f:?} {shape:?}"), one(LayerSpec::Neuron(f), &shape, &mut rng));
        }
    }
    // BNLL past its clamp.
    let mut case = one(LayerSpec::Neuron(NeuronFn::Bnll), &vec![8], &mut rng);
    case.bottoms[0] = vec![-80.0, -60.0, -1.0, 0.0, 1.0, 49.0, 60.0, 80.0];
    compare(&gpu, "BNLL at its ends", case);
}

#[test]
fn euclidean_and_sigmoid_cross_entropy_losses_match_the_cpu() {
    let Some(gpu) = gpu("euclidean_and_sigmoid_cross_entropy_losses_match_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(34);
    for shape in [vec![8, 6], vec![3, 2, 5, 7], vec![300, 1]] {
        compare(
            &gpu,
            &format!("euclidean {shape:?}"),
            build(spec(LayerSpec::EuclideanLoss), &[shape.clone(), shape.clone()], true, &mut rng),
        );
        let mut case = build(spec(LayerSpec::EuclideanLoss), &[shape.clone(), shape.clone()], true, &mut rng);
        case.no_gradient = vec![1];
        compare(&gpu, &format!("euclidean {shape:?}, no gradient to b"), case);
        for norm in [LossNorm::Batch, LossNorm::Count, LossNorm::None] {
            let mut case =
                build(spec(LayerSpec::SigmoidCrossEntropyLoss(norm)), &[shape.clone(), shape.clone()], true, &mut rng);
            case.bottoms[0].iter_mut().for_each(|v| *v *= 8.0);
            case.bottoms[1] = (0..count(&shape)).map(|_| rng.gen_range(0.0..1.0f32)).collect();
            case.no_gradient = vec![1];
            compare(&gpu, &format!("sigmoid cross-entropy {norm:?} {shape:?}"), case);
        }
    }
}

/// The trainer stages exactly the layers without GPU code (`Layer::on_gpu`):
/// every layer above has it now; ArgMax (no GPU code in Caffe either) stays
/// staged. Needs no device.
#[test]
fn only_argmax_is_staged() {
    let x = vec![2, 3, 4, 5];
    let conv = deconv(4, 3, 1, 0, 1, true);
    let built =
        |kind: LayerSpec, shapes: &[Shape]| -> Box<dyn Layer> { layers::build(&spec(kind), shapes, true).unwrap() };
    let on_gpu = [
        built(LayerSpec::Crop { axis: 2, offsets: vec![1] }, &[x.clone(), vec![2, 3, 2, 2]]),
        built(LayerSpec::Deconvolution(conv), std::slice::from_ref(&x)),
        built(LayerSpec::Bias(BiasConf::default()), std::slice::from_ref(&x)),
        built(LayerSpec::Tile { axis: 1, tiles: 2 }, std::slice::from_ref(&x)),
        built(LayerSpec::Reduction(ReductionConf::default()), std::slice::from_ref(&x)),
        built(
            LayerSpec::Embed(EmbedConf {
                num_output: 3,
                input_dim: 4,
                bias_term: true,
                weight_filler: Filler::Constant(0.0),
                bias_filler: Filler::Constant(0.0),
            }),
            &[vec![5]],
        ),
        built(LayerSpec::Mvn(MvnConf::default()), std::slice::from_ref(&x)),
        built(LayerSpec::Spp(SppConf { pyramid_height: 2, method: PoolMethod::Max }), std::slice::from_ref(&x)),
        built(LayerSpec::Parameter { shape: vec![3] }, &[]),
        built(LayerSpec::ContrastiveLoss(ContrastiveConf::default()), &[vec![2, 3], vec![2, 3], vec![2]]),
        built(LayerSpec::HingeLoss(HingeNorm::L1), &[vec![2, 3], vec![2]]),
        built(LayerSpec::MultinomialLogisticLoss, &[vec![2, 3], vec![2]]),
        built(
            LayerSpec::InfogainLoss(InfogainConf {
                axis: 1,
                norm: LossNorm::Batch,
                source: None,
                base_dir: Default::default(),
                matrix: Vec::new(),
            }),
            &[vec![2, 3], vec![2], vec![3, 3]],
        ),
        built(LayerSpec::EuclideanLoss, &[vec![2, 3], vec![2, 3]]),
        built(LayerSpec::SigmoidCrossEntropyLoss(LossNorm::Batch), &[vec![2, 3], vec![2, 3]]),
        built(LayerSpec::Neuron(NeuronFn::AbsVal), std::slice::from_ref(&x)),
        built(LayerSpec::Neuron(NeuronFn::Bnll), std::slice::from_ref(&x)),
        built(LayerSpec::Neuron(NeuronFn::Log { base: -1.0, scale: 1.0, shift: 0.0 }), std::slice::from_ref(&x)),
        built(LayerSpec::Neuron(NeuronFn::Threshold(0.0)), std::slice::from_ref(&x)),
        built(LayerSpec::Neuron(NeuronFn::Exp { base: -1.0, scale: 1.0, shift: 0.0 }), std::slice::from_ref(&x)),
        built(LayerSpec::Neuron(NeuronFn::Elu(1.0)), std::slice::from_ref(&x)),
    ];
    for l in &on_gpu {
        assert!(l.on_gpu(), "{} still stages through host memory", l.type_name());
    }
    let argmax = built(LayerSpec::ArgMax(ArgMaxConf { out_max_val: false, top_k: 1, axis: None }), &[x]);
    assert!(!argmax.on_gpu(), "ArgMax has no GPU code (as in Caffe): it is staged");
}

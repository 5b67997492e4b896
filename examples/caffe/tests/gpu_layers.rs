//! Every layer with GPU code against its CPU code on random shapes (ragged
//! sizes, partial blocks, more and fewer elements than a block): forward
//! tops and backward state, bottom and parameter gradients agree within
//! `TOLERANCE` relative to each value's magnitude (the GEMMs and reductions
//! sum in other orders; expf/tanhf differ by a few ulps). Runs on CUDA
//! device 0 — the emulated driver here (`scripts/with-cuda-emu`) — and is
//! skipped without one unless GEEPS_REQUIRE_CUDA=1. Layers whose GPU code
//! rounds as the CPU's does (copies, Eltwise, Split, BatchNorm with global
//! statistics) must give its bits. The comparison itself is `gpu_compare`'s.

mod gpu_compare;

use caffe_geeps::gpu::Gpu;
use caffe_geeps::layers::count;
use caffe_geeps::layers::eltwise::EltwiseOp;
use caffe_geeps::layers::lrn::{LrnConf, NormRegion};
use caffe_geeps::layers::power::PowerConf;
use caffe_geeps::layers::scale::ScaleConf;
use caffe_geeps::layers::spec::{BatchNormSpec, LayerSpec};
use caffe_geeps::layers::split::Split;
use caffe_geeps::proto::net::{
    ConvConf, Filler, InnerProductConf, LayerKind, Normalization, PoolConf, PoolMethod, PoolRound,
};
use gpu_compare::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn convolution_matches_the_cpu() {
    let Some(gpu) = gpu("convolution_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(1);
    let conf = |num_output, kernel, stride, pad, dilation, group, bias_term| ConvConf {
        num_output,
        kernel,
        stride,
        pad,
        dilation,
        group,
        bias_term,
        weight_filler: Filler::Constant(0.0),
        bias_filler: Filler::Constant(0.0),
    };
    let cases = [
        (conf(5, (5, 5), (1, 1), (0, 0), (1, 1), 1, true), vec![3, 1, 13, 11]),
        (conf(4, (3, 2), (2, 1), (1, 2), (1, 1), 1, true), vec![2, 3, 9, 7]),
        (conf(6, (3, 3), (1, 2), (2, 1), (2, 1), 3, false), vec![2, 3, 10, 9]),
        (conf(7, (1, 1), (1, 1), (0, 0), (1, 1), 1, true), vec![1, 17, 5, 3]),
        // A 1×1 kernel over several images and two groups reads the bottom as its columns.
        (conf(6, (1, 1), (1, 1), (0, 0), (1, 1), 2, true), vec![3, 4, 5, 3]),
        // Depthwise (MobileNet's): more groups than images, one GEMM per image over the groups.
        (conf(8, (3, 3), (1, 1), (1, 1), (1, 1), 8, false), vec![2, 8, 6, 5]),
        // Two outputs per input channel, strided.
        (conf(16, (3, 3), (2, 2), (1, 1), (1, 1), 8, true), vec![3, 8, 7, 6]),
        // A 1×1 kernel with more groups than images reads the bottom as its columns.
        (conf(8, (1, 1), (1, 1), (0, 0), (1, 1), 4, true), vec![1, 8, 4, 3]),
    ];
    for (i, (c, shape)) in cases.into_iter().enumerate() {
        let case = build(LayerKind::Convolution(c), std::slice::from_ref(&shape), true, &mut rng);
        compare(&gpu, &format!("convolution {i} {shape:?}"), case);
    }
    // A scratch bound of two images' columns (27 × 64 floats each): runs of 2, 2 and 1
    // images, the weight gradient summed across them.
    gpu.set_scratch_bound(4096);
    let case = build(
        LayerKind::Convolution(conf(4, (3, 3), (1, 1), (1, 1), (1, 1), 1, true)),
        &[vec![5, 3, 8, 8]],
        true,
        &mut rng,
    );
    compare(&gpu, "convolution in runs of 2 images", case);
    // Depthwise, 3 groups, in runs of 2 images under the same bound: per image over the groups.
    let case = build(
        LayerKind::Convolution(conf(3, (3, 3), (1, 1), (1, 1), (1, 1), 3, true)),
        &[vec![5, 3, 8, 8]],
        true,
        &mut rng,
    );
    compare(&gpu, "depthwise convolution in runs of 2 images", case);
    gpu.set_scratch_bound(caffe_geeps::gpu::DEFAULT_SCRATCH_BOUND);
}

#[test]
fn inner_product_matches_the_cpu() {
    let Some(gpu) = gpu("inner_product_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(2);
    for (num_output, bias_term, shape) in
        [(10, true, vec![7, 3, 5, 5]), (33, false, vec![1, 300]), (1, true, vec![9, 2])]
    {
        let conf = InnerProductConf {
            num_output,
            bias_term,
            weight_filler: Filler::Constant(0.0),
            bias_filler: Filler::Constant(0.0),
        };
        let case = build(LayerKind::InnerProduct(conf), std::slice::from_ref(&shape), true, &mut rng);
        compare(&gpu, &format!("inner product {num_output} {shape:?}"), case);
    }
}

#[test]
fn pooling_matches_the_cpu() {
    let Some(gpu) = gpu("pooling_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(3);
    for method in [PoolMethod::Max, PoolMethod::Ave] {
        for (kernel, stride, pad, shape, round) in [
            ((2, 2), (2, 2), (0, 0), vec![3, 5, 12, 12], PoolRound::Ceil),
            ((3, 3), (2, 2), (1, 1), vec![2, 3, 7, 6], PoolRound::Ceil),
            ((3, 2), (1, 2), (0, 1), vec![1, 4, 9, 11], PoolRound::Ceil),
            ((3, 3), (2, 2), (1, 1), vec![2, 3, 8, 7], PoolRound::Floor),
        ] {
            let conf = PoolConf { method, kernel, stride, pad, global: false, round };
            let case = build(LayerKind::Pooling(conf), std::slice::from_ref(&shape), true, &mut rng);
            compare(&gpu, &format!("{method:?} pooling {kernel:?}/{stride:?} pad {pad:?} {round:?} {shape:?}"), case);
        }
    }
}

#[test]
fn activations_and_dropout_match_the_cpu() {
    let Some(gpu) = gpu("activations_and_dropout_match_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(4);
    // 1000 elements: several blocks, the last one partial; 7: fewer than a warp.
    for shape in [vec![4, 250], vec![7]] {
        for kind in [
            LayerKind::ReLU { negative_slope: 0.0 },
            LayerKind::ReLU { negative_slope: 0.1 },
            LayerKind::Sigmoid,
            LayerKind::TanH,
            LayerKind::Dropout { ratio: 0.3 },
        ] {
            let what = format!("{kind:?} {shape:?}");
            compare(&gpu, &what, build(kind, std::slice::from_ref(&shape), true, &mut rng));
        }
    }
    // Dropout at test time is the identity.
    let test = build(LayerKind::Dropout { ratio: 0.5 }, &[vec![300]], false, &mut rng);
    compare(&gpu, "dropout at test time", test);
}

#[test]
fn softmax_loss_and_accuracy_match_the_cpu() {
    let Some(gpu) = gpu("softmax_loss_and_accuracy_match_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(5);
    for (num, classes) in [(64, 10), (3, 1000), (300, 2)] {
        for normalization in [Normalization::Batch, Normalization::None] {
            let case = with_labels(LayerKind::SoftmaxWithLoss { normalization }, num, classes, &mut rng);
            compare(&gpu, &format!("softmax loss {num}×{classes} {normalization:?}"), case);
        }
        for top_k in [1, 2.min(classes)] {
            let case = with_labels(LayerKind::Accuracy { top_k }, num, classes, &mut rng);
            compare(&gpu, &format!("accuracy top-{top_k} {num}×{classes}"), case);
        }
    }
}

fn spec(s: LayerSpec) -> LayerKind {
    LayerKind::Spec(s)
}

#[test]
fn lrn_matches_the_cpu() {
    let Some(gpu) = gpu("lrn_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(6);
    let across = LrnConf::default();
    let within = LrnConf { local_size: 3, alpha: 0.5, beta: 0.6, region: NormRegion::WithinChannel, ..across };
    let wide = LrnConf { local_size: 7, k: 2.0, ..across };
    for (conf, shape) in [
        (across, vec![2, 7, 5, 9]),
        (within, vec![2, 3, 11, 13]),
        (wide, vec![1, 4, 17, 5]),
        (LrnConf { local_size: 5, ..within }, vec![3, 2, 4, 3]),
    ] {
        let case = build(spec(LayerSpec::Lrn(conf)), std::slice::from_ref(&shape), true, &mut rng);
        compare(&gpu, &format!("LRN {conf:?} {shape:?}"), case);
    }
}

#[test]
fn concat_matches_the_cpu() {
    let Some(gpu) = gpu("concat_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(7);
    for (axis, shapes) in [
        (0, vec![vec![2, 3, 5, 7], vec![1, 3, 5, 7], vec![3, 3, 5, 7]]),
        (1, vec![vec![2, 3, 5, 7], vec![2, 4, 5, 7], vec![2, 1, 5, 7]]),
        (-1, vec![vec![3, 5, 11], vec![3, 5, 2]]),
    ] {
        let mut case = build(spec(LayerSpec::Concat { axis }), &shapes, true, &mut rng);
        exact(&gpu, &format!("concat axis {axis} {shapes:?}"), case);
        // A bottom that wants no gradient is left alone.
        case = build(spec(LayerSpec::Concat { axis }), &shapes, true, &mut rng);
        case.no_gradient = vec![1];
        exact(&gpu, &format!("concat axis {axis} {shapes:?}, bottom 1 without gradient"), case);
    }
}

#[test]
fn slice_matches_the_cpu() {
    let Some(gpu) = gpu("slice_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(8);
    for (axis, points, tops, shape) in
        [(0, vec![1, 3], 3, vec![5, 3, 2, 7]), (1, vec![], 2, vec![2, 6, 5, 3]), (-1, vec![4], 2, vec![3, 5, 11])]
    {
        let s = LayerSpec::Slice { axis, points: points.clone(), tops };
        let case = build(spec(s.clone()), std::slice::from_ref(&shape), true, &mut rng);
        exact(&gpu, &format!("slice axis {axis} at {points:?} {shape:?}"), case);
        // A top no loss reaches: its part of the bottom gradient is zero.
        let mut case = build(spec(s), std::slice::from_ref(&shape), true, &mut rng);
        case.no_top_gradient = vec![1];
        exact(&gpu, &format!("slice axis {axis} {shape:?}, top 1 without gradient"), case);
    }
}

#[test]
fn eltwise_matches_the_cpu() {
    let Some(gpu) = gpu("eltwise_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(8);
    let shape = vec![3, 7, 13];
    for op in [EltwiseOp::Sum(vec![]), EltwiseOp::Sum(vec![0.5, -2.0, 1.5]), EltwiseOp::Prod, EltwiseOp::Max] {
        let mut case = build(spec(LayerSpec::Eltwise(op.clone())), &vec![shape.clone(); 3], true, &mut rng);
        if op == EltwiseOp::Max {
            // Ties: the earlier bottom wins on both.
            for i in (0..count(&shape)).step_by(3) {
                case.bottoms[2][i] = case.bottoms[0][i];
                case.bottoms[1][i + 1] = case.bottoms[2][i + 1];
            }
        }
        exact(&gpu, &format!("eltwise {op:?} {shape:?}"), case);
    }
    let mut two = build(spec(LayerSpec::Eltwise(EltwiseOp::Prod)), &[vec![300], vec![300]], true, &mut rng);
    two.no_gradient = vec![0];
    exact(&gpu, "eltwise product, bottom 0 without gradient", two);
}

#[test]
fn softmax_matches_the_cpu() {
    let Some(gpu) = gpu("softmax_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(9);
    for (axis, shape) in
        [(1, vec![3, 11, 5, 7]), (-1, vec![4, 3, 67]), (1, vec![130, 10]), (2, vec![2, 3, 9, 5]), (0, vec![5, 61])]
    {
        let case = build(spec(LayerSpec::Softmax { axis }), std::slice::from_ref(&shape), true, &mut rng);
        compare(&gpu, &format!("softmax axis {axis} {shape:?}"), case);
    }
}

#[test]
fn split_reshape_and_flatten_match_the_cpu() {
    let Some(gpu) = gpu("split_reshape_and_flatten_match_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(10);
    let shape = vec![3, 5, 7, 3];
    for tops in [1, 3] {
        let layer = Box::new(Split::new(tops, &shape).unwrap());
        let bottoms = vec![random(&mut rng, count(&shape))];
        let case = Case { layer, bottoms, no_gradient: vec![], no_top_gradient: vec![], params: None, train: true };
        exact(&gpu, &format!("split into {tops}"), case);
    }
    let layer = Box::new(Split::new(3, &shape).unwrap());
    let bottoms = vec![random(&mut rng, count(&shape))];
    let case = Case { layer, bottoms, no_gradient: vec![], no_top_gradient: vec![1], params: None, train: true };
    exact(&gpu, "split into 3, top 1 outside every loss", case);
    for kind in [
        LayerSpec::Flatten { axis: 1, end_axis: -1 },
        LayerSpec::Flatten { axis: 0, end_axis: 1 },
        LayerSpec::Reshape { dims: vec![0, -1, 7], axis: 0, num_axes: -1 },
        LayerSpec::Reshape { dims: vec![15], axis: 0, num_axes: 2 },
    ] {
        let what = format!("{kind:?}");
        exact(&gpu, &what, build(spec(kind), std::slice::from_ref(&shape), true, &mut rng));
    }
}

#[test]
fn power_matches_the_cpu() {
    let Some(gpu) = gpu("power_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(12);
    let shape = vec![4, 3, 29];
    // Bases stay positive where the power is not an integer (a NaN on both otherwise).
    for (power, scale, shift) in [
        (1.0, 1.0, 0.0),
        (2.0, 1.0, 0.0),
        (3.0, -0.5, 0.25),
        (0.5, 0.25, 1.5),
        (-1.5, 0.5, 2.0),
        (1.0, -3.0, 0.5),
        (0.0, 2.0, 1.0),
        (2.0, 0.0, 1.0),
    ] {
        let conf = PowerConf { power, scale, shift };
        let case = build(spec(LayerSpec::Power(conf)), std::slice::from_ref(&shape), true, &mut rng);
        compare(&gpu, &format!("power {conf:?}"), case);
    }
}

#[test]
fn scale_matches_the_cpu() {
    let Some(gpu) = gpu("scale_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(13);
    let shape = vec![3, 5, 7, 11];
    for (axis, num_axes) in [(1, 1), (1, 2), (0, 1), (1, -1), (-1, 1), (2, 0), (0, 4)] {
        for bias_term in [false, true] {
            let conf = ScaleConf { axis, num_axes, bias_term, ..ScaleConf::default() };
            let case = build(spec(LayerSpec::Scale(conf)), std::slice::from_ref(&shape), true, &mut rng);
            compare(&gpu, &format!("scale axis {axis} num_axes {num_axes} bias {bias_term}"), case);
        }
    }
}

#[test]
fn prelu_matches_the_cpu() {
    let Some(gpu) = gpu("prelu_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(14);
    for shape in [vec![3, 5, 7, 11], vec![300, 4], vec![2, 3, 1000]] {
        for channel_shared in [false, true] {
            let kind = spec(LayerSpec::PRelu { channel_shared, filler: Filler::Constant(0.25) });
            let case = build(kind, std::slice::from_ref(&shape), true, &mut rng);
            compare(&gpu, &format!("PReLU {shape:?} shared {channel_shared}"), case);
        }
    }
}

#[test]
fn batch_norm_matches_the_cpu() {
    let Some(gpu) = gpu("batch_norm_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(15);
    // 715 values per channel: several passes of a block; 300 and 45: one, partly idle.
    for shape in [vec![5, 3, 11, 13], vec![300, 2], vec![3, 6, 3, 5]] {
        let c = shape[1];
        for use_global_stats in [false, true] {
            let bn = BatchNormSpec { use_global_stats: Some(use_global_stats), ..BatchNormSpec::default() };
            let mut case = build(spec(LayerSpec::BatchNorm(bn)), std::slice::from_ref(&shape), true, &mut rng);
            // Running sums: means any sign, variances positive, their factor positive or 0 (none yet).
            for factor in [2.5f32, 0.0] {
                let mut p = random(&mut rng, c);
                p.extend((0..c).map(|_| rng.gen_range(0.1..3.0f32)));
                p.push(factor);
                case.params = Some(p);
                let what = format!("BatchNorm {shape:?} global {use_global_stats} factor {factor}");
                // Global statistics round as the CPU does; batch statistics sum in f32, not f64.
                if use_global_stats {
                    exact(&gpu, &what, case);
                } else {
                    compare(&gpu, &what, case);
                }
                case = build(spec(LayerSpec::BatchNorm(bn)), std::slice::from_ref(&shape), true, &mut rng);
            }
        }
    }
}

#[test]
fn input_matches_the_cpu() {
    let Some(gpu) = gpu("input_matches_the_cpu") else { return };
    let mut rng = StdRng::seed_from_u64(16);
    let kind = spec(LayerSpec::Input { shapes: vec![vec![2, 3, 7, 7], vec![5]], tops: 2 });
    exact(&gpu, "input", build(kind, &[], true, &mut rng));
}

#[test]
fn layers_write_no_gradient_where_none_is_wanted() {
    let Some(gpu) = gpu("layers_write_no_gradient_where_none_is_wanted") else { return };
    let mut rng = StdRng::seed_from_u64(17);
    let shape = vec![2, 5, 3, 11];
    for kind in [
        LayerSpec::Lrn(LrnConf::default()),
        LayerSpec::Softmax { axis: 1 },
        LayerSpec::Power(PowerConf { power: 2.0, scale: 0.5, shift: 1.0 }),
        LayerSpec::Flatten { axis: 1, end_axis: -1 },
    ] {
        let what = format!("{kind:?} without a bottom gradient");
        let mut case = build(spec(kind), std::slice::from_ref(&shape), true, &mut rng);
        case.no_gradient = vec![0];
        compare(&gpu, &what, case);
    }
}

/// Without a driver, opening the GPU compute is one clear error, not a panic.
#[test]
fn without_a_driver_opening_is_a_clear_error() {
    if geeps_testkit::Backend::cuda_for("without_a_driver_opening_is_a_clear_error").is_some() {
        return;
    }
    let err = Gpu::open(0).err().expect("no driver, no GPU compute").to_string();
    assert!(err.contains("GPU"), "{err}");
}

/// Every solver's step on the GPU gives the host solver's bits: SGD,
/// Nesterov, AdaGrad, RMSProp, AdaDelta and Adam, with L2 and L1, blobs of
/// different multipliers, a worker's share and a clipping factor, over
/// several steps (the histories carry over).
#[test]
fn every_solver_steps_on_the_gpu_as_on_the_host() {
    use caffe_geeps::net::params::{BlobSlot, LayerParams};
    use caffe_geeps::proto::net::ParamSpec;
    use caffe_geeps::proto::solver::{Regularization, SolverType};
    use caffe_geeps::solvers::{layer_delta, Rule, Step};
    let Some(gpu) = gpu("every_solver_steps_on_the_gpu_as_on_the_host") else { return };
    let mut rng = StdRng::seed_from_u64(9);
    let blob = |offset, len, lr_mult, decay_mult| BlobSlot {
        shape: vec![len],
        offset,
        len,
        spec: ParamSpec { lr_mult, decay_mult },
    };
    // 700 + 301 values: several blocks, a partial last one.
    let lp = LayerParams {
        layer: 0,
        users: vec![0],
        name: "ip".into(),
        type_name: "InnerProduct",
        blobs: vec![blob(0, 700, 1.0, 1.0), blob(700, 301, 2.0, 0.0)],
        len: 1001,
    };
    for kind in [
        SolverType::Sgd,
        SolverType::Nesterov,
        SolverType::AdaGrad,
        SolverType::RmsProp,
        SolverType::AdaDelta,
        SolverType::Adam,
    ] {
        for regularization in [Regularization::L2, Regularization::L1] {
            let rule = Rule {
                kind,
                momentum: 0.9,
                momentum2: 0.999,
                delta: 1e-8,
                rms_decay: 0.98,
                weight_decay: 0.01,
                regularization,
                clip_gradients: None,
                iter_size: 1,
            };
            let mut w = random(&mut rng, lp.len);
            w[3] = 0.0; // sign(0) under L1
            let mut history = vec![0.0f32; rule.history_slots() * lp.len];
            let (w_dev, h_dev) = (gpu.alloc_from(&w).unwrap(), gpu.alloc_from(&history).unwrap());
            for iter in 0..3 {
                let step = Step { rate: 0.01, iter, scale: 0.5, clip: 0.75 };
                let mut grad = random(&mut rng, lp.len);
                let g_dev = gpu.alloc_from(&grad).unwrap();
                layer_delta(&lp, &rule, step, &w, &mut grad, &mut history);
                gpu.solver_step(&lp, &rule, step, w_dev.slice(), g_dev.slice(), h_dev.slice()).unwrap();
                let what = format!("{kind:?} {regularization:?} step {iter}");
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&g_dev.to_vec().unwrap()), bits(&grad), "{what}: delta");
                assert_eq!(bits(&h_dev.to_vec().unwrap()), bits(&history), "{what}: history");
                w.iter_mut().zip(&grad).for_each(|(p, d)| *p += d);
                gpu.upload(&w, w_dev.slice()).unwrap();
            }
        }
    }
}

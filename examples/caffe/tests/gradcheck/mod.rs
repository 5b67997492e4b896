//! The finite-difference check the layer tests share: a layer's backward
//! (bottom and parameter gradients) against central differences of its
//! forward, on random inputs away from kinks. It owns the check only.

#![allow(dead_code)]

use caffe_geeps::layers::{self, count, Backward, Forward, Layer, Shape};
use caffe_geeps::proto::net::{Filler, LayerKind, VarianceNorm};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const EPS: f32 = 1e-2;

pub fn random(rng: &mut StdRng, n: usize) -> Vec<f32> {
    // Magnitudes in [0.1, 1.1): no input sits within EPS of ReLU's kink.
    (0..n).map(|_| rng.gen_range(0.1..1.1f32) * if rng.gen() { 1.0 } else { -1.0 }).collect()
}

/// The layer's objective: Σ top · r for ordinary layers, the loss itself
/// (scaled by loss_weight 1) for a loss layer.
pub fn objective(l: &dyn Layer, params: &[f32], bottoms: &[Vec<f32>], r: &[Vec<f32>]) -> f64 {
    let tops_shape = l.top_shapes();
    let mut tops: Vec<Vec<f32>> = tops_shape.iter().map(|s| vec![0.0; count(s)]).collect();
    let mut aux = vec![0.0; l.aux_len()];
    let b: Vec<&[f32]> = if l.elementwise() {
        tops[0].copy_from_slice(&bottoms[0]);
        Vec::new()
    } else {
        bottoms.iter().map(|v| v.as_slice()).collect()
    };
    let mut t: Vec<&mut [f32]> = tops.iter_mut().map(|v| v.as_mut_slice()).collect();
    l.forward(Forward { params, bottoms: &b, tops: &mut t, aux: &mut aux, train: true, seed: 99 });
    if l.is_loss() {
        return f64::from(tops[0][0]);
    }
    tops.iter().zip(r).map(|(t, r)| t.iter().zip(r).map(|(a, b)| f64::from(a * b)).sum::<f64>()).sum()
}

/// Analytic gradients: (per bottom, params).
pub fn analytic(
    l: &dyn Layer,
    params: &[f32],
    bottoms: &[Vec<f32>],
    r: &[Vec<f32>],
    differentiable: usize,
) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut tops: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| vec![0.0; count(s)]).collect();
    let mut aux = vec![0.0; l.aux_len()];
    let b: Vec<&[f32]> = if l.elementwise() {
        tops[0].copy_from_slice(&bottoms[0]);
        Vec::new()
    } else {
        bottoms.iter().map(|v| v.as_slice()).collect()
    };
    {
        let mut t: Vec<&mut [f32]> = tops.iter_mut().map(|v| v.as_mut_slice()).collect();
        l.forward(Forward { params, bottoms: &b, tops: &mut t, aux: &mut aux, train: true, seed: 99 });
    }
    let mut dx: Vec<Vec<f32>> = bottoms.iter().map(|v| vec![0.0; v.len()]).collect();
    if l.elementwise() {
        dx[0].copy_from_slice(&r[0]);
    }
    let mut grad = vec![0.0; params.len()];
    let all: Vec<&[f32]> = bottoms.iter().map(|v| v.as_slice()).collect();
    let top_data: Vec<&[f32]> = tops.iter().map(|v| v.as_slice()).collect();
    let top_diffs: Vec<&[f32]> =
        if l.elementwise() || l.is_loss() { Vec::new() } else { r.iter().map(|v| v.as_slice()).collect() };
    let mut d: Vec<&mut [f32]> = dx.iter_mut().map(|v| v.as_mut_slice()).collect();
    if l.is_loss() && differentiable < 2 {
        // Labels get no gradient.
        d[1] = &mut [];
    }
    l.backward(Backward {
        params,
        bottoms: &all,
        tops: &top_data,
        top_diffs: &top_diffs,
        bottom_diffs: &mut d,
        param_grad: &mut grad,
        aux: &aux,
        loss_weight: 1.0,
    });
    (dx, grad)
}

pub fn close(what: &str, i: usize, a: f32, n: f64) {
    let n = n as f32;
    let tol = 2e-3 + 2e-2 * a.abs().max(n.abs());
    assert!((a - n).abs() <= tol, "{what}[{i}]: backward {a}, finite difference {n}");
}

/// Checks `kind` on bottoms of `shapes`; `labels` marks bottoms holding class labels.
pub fn check(kind: LayerKind, shapes: &[Shape], labels: Option<usize>) {
    let mut rng = StdRng::seed_from_u64(42);
    let l = layers::build(&kind, shapes, true).unwrap();
    let mut bottoms: Vec<Vec<f32>> = shapes.iter().map(|s| random(&mut rng, count(s))).collect();
    if matches!(kind, LayerKind::Pooling(_)) {
        bottoms[0] = distinct(&mut rng, bottoms[0].len());
    }
    if let Some(c) = labels {
        bottoms[1] = (0..count(&shapes[1])).map(|_| rng.gen_range(0..c) as f32).collect();
    }
    let differentiable = if labels.is_some() { 1 } else { bottoms.len() };
    check_layer(l.as_ref(), bottoms, differentiable, None);
}

/// Distinct values 0.05 apart, shuffled: no perturbation changes which one is a max.
pub fn distinct(rng: &mut StdRng, n: usize) -> Vec<f32> {
    use rand::seq::SliceRandom;
    let mut v: Vec<f32> = (0..n).map(|i| i as f32 * 0.05 - n as f32 * 0.025).collect();
    v.shuffle(rng);
    v
}

/// Checks `l` on random bottoms of its shapes (gradients of every bottom and parameter).
pub fn check_built(l: &dyn Layer, shapes: &[Shape]) {
    let mut rng = StdRng::seed_from_u64(7);
    let bottoms = shapes.iter().map(|s| random(&mut rng, count(s))).collect();
    check_layer(l, bottoms, shapes.len(), None);
}

/// Compares `l`'s backward with finite differences for the first
/// `differentiable` bottoms and, unless its parameters are statistics, its
/// parameters (random, or `params` when given).
pub fn check_layer(l: &dyn Layer, mut bottoms: Vec<Vec<f32>>, differentiable: usize, params: Option<Vec<f32>>) {
    let mut rng = StdRng::seed_from_u64(43);
    let n_params: usize = l.param_blobs().iter().map(|p| count(&p.shape)).sum();
    let mut params = params.unwrap_or_else(|| random(&mut rng, n_params).iter().map(|v| v * 0.5).collect());
    assert_eq!(params.len(), n_params);
    let r: Vec<Vec<f32>> = l.top_shapes().iter().map(|s| random(&mut rng, count(s))).collect();
    let (dx, grad) = analytic(l, &params, &bottoms, &r, differentiable);
    for b in 0..differentiable {
        for i in 0..bottoms[b].len() {
            let keep = bottoms[b][i];
            bottoms[b][i] = keep + EPS;
            let up = objective(l, &params, &bottoms, &r);
            bottoms[b][i] = keep - EPS;
            let down = objective(l, &params, &bottoms, &r);
            bottoms[b][i] = keep;
            close(&format!("{} bottom {b}", l.type_name()), i, dx[b][i], (up - down) / (2.0 * f64::from(EPS)));
        }
    }
    if l.param_grad_is_update() {
        return;
    }
    for i in 0..params.len() {
        let keep = params[i];
        params[i] = keep + EPS;
        let up = objective(l, &params, &bottoms, &r);
        params[i] = keep - EPS;
        let down = objective(l, &params, &bottoms, &r);
        params[i] = keep;
        close(&format!("{} param", l.type_name()), i, grad[i], (up - down) / (2.0 * f64::from(EPS)));
    }
}

pub fn xavier() -> Filler {
    Filler::Xavier(VarianceNorm::FanIn)
}

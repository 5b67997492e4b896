//! What happens to a gradient before a solver rule sees it, in Caffe's
//! order: clipping by the L2 norm over every layer, averaging over
//! iter_size, L1/L2 regularization; then this worker's 1/N share. It owns
//! those steps; it must never update a history or a parameter.

use crate::net::params::LayerParams;
use crate::proto::solver::Regularization;

/// The sum of squares of a layer's gradient over the blobs that learn
/// (Caffe leaves the gradients of lr_mult 0 blobs at zero).
pub fn sumsq(lp: &LayerParams, grad: &[f32]) -> f64 {
    lp.blobs
        .iter()
        .filter(|b| b.spec.lr_mult != 0.0)
        .flat_map(|b| &grad[b.offset..b.offset + b.len])
        .map(|&g| g as f64 * g as f64)
        .sum()
}

/// Caffe's ClipGradients: clip / ‖g‖₂ when the norm over all layers
/// (`sumsq` summed) exceeds `clip`, else 1.
pub fn clip_factor(clip: Option<f32>, sumsq: f64) -> f32 {
    let norm = sumsq.sqrt() as f32;
    match clip {
        Some(c) if norm > c => c / norm,
        _ => 1.0,
    }
}

/// g ← scale·(g·factor + local_decay·reg(w)), where `factor` folds the
/// clipping factor and 1 / iter_size; reg(w) is w (L2) or sign(w) (L1).
pub fn prepare(g: &mut [f32], w: &[f32], factor: f32, local_decay: f32, reg: Regularization, scale: f32) {
    for (gi, &wi) in g.iter_mut().zip(w) {
        let decay = match reg {
            Regularization::L2 => local_decay * wi,
            // Caffe's sign: 0 at 0.
            Regularization::L1 => local_decay * ((0.0 < wi) as i32 - (wi < 0.0) as i32) as f32,
        };
        *gi = scale * (*gi * factor + decay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::params::BlobSlot;
    use crate::proto::net::ParamSpec;

    #[test]
    fn clipping_scales_to_the_threshold_only_above_it() {
        // ‖(3, 4)‖ = 5.
        assert_eq!(clip_factor(Some(10.0), 25.0), 1.0);
        assert_eq!(clip_factor(Some(5.0), 25.0), 1.0);
        assert!((clip_factor(Some(2.0), 25.0) - 0.4).abs() < 1e-7);
        assert_eq!(clip_factor(None, 1e12), 1.0);
    }

    #[test]
    fn the_norm_skips_blobs_that_do_not_learn() {
        let blob =
            |offset, lr_mult| BlobSlot { shape: vec![2], offset, len: 2, spec: ParamSpec { lr_mult, decay_mult: 1.0 } };
        let lp = LayerParams {
            layer: 0,
            users: vec![0],
            name: "c".into(),
            type_name: "Convolution",
            blobs: vec![blob(0, 1.0), blob(2, 0.0)],
            len: 4,
        };
        assert_eq!(sumsq(&lp, &[3.0, 4.0, 100.0, 100.0]), 25.0);
    }

    #[test]
    fn regularization_then_the_workers_share() {
        let mut g = [1.0, 1.0, 1.0];
        prepare(&mut g, &[2.0, -3.0, 0.0], 0.5, 0.1, Regularization::L2, 0.5);
        // 0.5·(0.5 + 0.2), 0.5·(0.5 − 0.3), 0.5·0.5
        for (a, b) in g.iter().zip([0.35, 0.1, 0.25]) {
            assert!((a - b).abs() < 1e-7, "{g:?}");
        }
        let mut g = [1.0, 1.0, 1.0];
        prepare(&mut g, &[2.0, -3.0, 0.0], 1.0, 0.1, Regularization::L1, 1.0);
        for (a, b) in g.iter().zip([1.1, 0.9, 1.0]) {
            assert!((a - b).abs() < 1e-7, "{g:?}");
        }
    }
}

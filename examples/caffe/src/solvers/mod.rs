//! The solvers of Caffe's SGDSolver family (SGD, Nesterov, AdaGrad,
//! RMSProp, AdaDelta, Adam) as Caffe's ApplyUpdate runs them: clip, average
//! over iter_size, regularize, compute the update value, and the step
//! written as a delta (what geeps adds to the parameters). With N workers
//! each applies the rule to its own gradient scaled by 1/N, with its own
//! history; for SGD and Nesterov the deltas of one clock then add up exactly
//! to one step on the averaged gradient (see docs/caffe.md for the adaptive
//! ones). It owns that arithmetic; it must never touch storage. The
//! schedule that runs the solver over a whole training (Caffe's
//! `Solver::Solve`) is `solve`.

mod adaptive;
mod gradient;
mod lr_policy;
mod sgd;
pub mod snapshots;
pub mod solve;

pub use gradient::{clip_factor, sumsq};
pub use lr_policy::learning_rate;

use crate::net::params::LayerParams;
use crate::proto::solver::{Regularization, SolverParam, SolverType};

/// The solver's settings that every step uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    pub kind: SolverType,
    pub momentum: f32,
    pub momentum2: f32,
    pub delta: f32,
    pub rms_decay: f32,
    pub weight_decay: f32,
    pub regularization: Regularization,
    pub clip_gradients: Option<f32>,
    pub iter_size: u64,
}

impl Rule {
    pub fn of(s: &SolverParam) -> Rule {
        Rule {
            kind: s.solver_type,
            momentum: s.momentum,
            momentum2: s.momentum2,
            delta: s.delta,
            rms_decay: s.rms_decay,
            weight_decay: s.weight_decay,
            regularization: s.regularization,
            clip_gradients: s.clip_gradients,
            iter_size: s.iter_size,
        }
    }

    /// Copies of a layer's parameter vector the rule keeps between steps
    /// (Caffe's `history_`: AdaDelta and Adam keep two).
    pub fn history_slots(&self) -> usize {
        match self.kind {
            SolverType::AdaDelta | SolverType::Adam => 2,
            SolverType::Sgd | SolverType::Nesterov | SolverType::AdaGrad | SolverType::RmsProp => 1,
        }
    }

    /// Whether no layer may step before the whole gradient is known: the
    /// clipping norm spans every layer, and iter_size sums mini-batches.
    pub fn accumulates(&self) -> bool {
        self.iter_size > 1 || self.clip_gradients.is_some()
    }
}

/// What changes from step to step.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// The learning rate of this iteration.
    pub rate: f32,
    /// The iteration (Adam's bias correction uses iter + 1).
    pub iter: u64,
    /// 1 / number of workers.
    pub scale: f32,
    /// The clipping factor of this step's gradient (1: not clipped).
    pub clip: f32,
}

/// Turns the (summed) gradient in `grad_delta` into the parameter delta, in
/// place. `history` holds `rule.history_slots()` copies of the layer's
/// parameter vector, one after the other.
pub fn layer_delta(lp: &LayerParams, rule: &Rule, step: Step, w: &[f32], grad_delta: &mut [f32], history: &mut [f32]) {
    let (h1, h2) = history.split_at_mut(lp.len);
    let factor = step.clip / rule.iter_size as f32;
    for b in &lp.blobs {
        let r = b.offset..b.offset + b.len;
        let g = &mut grad_delta[r.clone()];
        let local_decay = rule.weight_decay * b.spec.decay_mult;
        gradient::prepare(g, &w[r.clone()], factor, local_decay, rule.regularization, step.scale);
        let local_rate = step.rate * b.spec.lr_mult;
        let h = &mut h1[r.clone()];
        match rule.kind {
            SolverType::Sgd => sgd::momentum(g, h, local_rate, rule.momentum),
            SolverType::Nesterov => sgd::nesterov(g, h, local_rate, rule.momentum),
            SolverType::AdaGrad => adaptive::adagrad(g, h, local_rate, rule.delta),
            SolverType::RmsProp => adaptive::rmsprop(g, h, local_rate, rule.delta, rule.rms_decay),
            SolverType::AdaDelta => adaptive::adadelta(g, h, &mut h2[r], local_rate, rule.delta, rule.momentum),
            SolverType::Adam => {
                let betas = (rule.momentum, rule.momentum2);
                adaptive::adam(g, h, &mut h2[r], local_rate, betas, rule.delta, step.iter + 1)
            }
        }
        // Caffe subtracts the update value; geeps adds the delta.
        g.iter_mut().for_each(|v| *v = -*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::params::BlobSlot;
    use crate::proto::net::ParamSpec;

    fn rule(kind: SolverType) -> Rule {
        Rule {
            kind,
            momentum: 0.9,
            momentum2: 0.999,
            delta: 1e-8,
            rms_decay: 0.99,
            weight_decay: 0.1,
            regularization: Regularization::L2,
            clip_gradients: None,
            iter_size: 1,
        }
    }

    /// A layer of two blobs: weights (2 values, lr_mult 1, decay_mult 1)
    /// and a bias (1 value, lr_mult 2, decay_mult 0), as LeNet's layers.
    fn layer() -> LayerParams {
        let blob = |offset, len, lr_mult, decay_mult| BlobSlot {
            shape: vec![len],
            offset,
            len,
            spec: ParamSpec { lr_mult, decay_mult },
        };
        LayerParams {
            layer: 0,
            users: vec![0],
            name: "ip".into(),
            type_name: "InnerProduct",
            blobs: vec![blob(0, 2, 1.0, 1.0), blob(2, 1, 2.0, 0.0)],
            len: 3,
        }
    }

    /// Within f32 rounding (1 − 0.999 is already 1.3e−5 off in f32).
    fn close(got: &[f32], want: &[f64]) {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((*g as f64 - w).abs() <= 3e-5 * w.abs().max(1e-3), "value {i}: {g} vs {w}; all {got:?}");
        }
    }

    #[test]
    fn sgd_regularizes_by_blob_and_scales_rate_by_lr_mult() {
        // w = (1, -2, 3), g = (0.5, 0.5, 0.5), decay 0.1 on the weights only.
        // Gradient with decay: (0.6, 0.3, 0.5); rate 0.1, the bias's 0.2.
        // h = 0.9·h + local_rate·g; delta = −h.
        let (lp, r) = (layer(), rule(SolverType::Sgd));
        let w = [1.0, -2.0, 3.0];
        let mut h = vec![0.0; 3];
        let step = Step { rate: 0.1, iter: 0, scale: 1.0, clip: 1.0 };
        let mut g = vec![0.5; 3];
        layer_delta(&lp, &r, step, &w, &mut g, &mut h);
        close(&g, &[-0.06, -0.03, -0.1]);
        let mut g = vec![0.5; 3];
        layer_delta(&lp, &r, step, &w, &mut g, &mut h);
        close(&g, &[-(0.9 * 0.06 + 0.06), -(0.9 * 0.03 + 0.03), -(0.9 * 0.1 + 0.1)]);
    }

    #[test]
    fn l1_decay_adds_the_sign_of_the_weights() {
        // L1: g + decay·sign(w); w = (1, -2, 0) gives (0.6, 0.4, 0.5), and
        // the bias has decay_mult 0 anyway.
        let (lp, mut r) = (layer(), rule(SolverType::Sgd));
        r.regularization = Regularization::L1;
        let mut h = vec![0.0; 3];
        let mut g = vec![0.5; 3];
        let step = Step { rate: 1.0, iter: 0, scale: 1.0, clip: 1.0 };
        layer_delta(&lp, &r, step, &[1.0, -2.0, 0.0], &mut g, &mut h);
        close(&g, &[-0.6, -0.4, -1.0]);
        // sign(0) is 0: no decay on a zero weight.
        let mut g = vec![0.0; 3];
        let mut h = vec![0.0; 3];
        layer_delta(&lp, &r, step, &[0.0, 0.0, 0.0], &mut g, &mut h);
        close(&g, &[0.0, 0.0, 0.0]);
    }

    #[test]
    fn workers_share_clipping_and_iter_size_apply_before_decay() {
        // Gradient summed over iter_size 2: (0.8, 0.8, 0.8); clipped by 0.5;
        // averaged: 0.2; decay adds 0.1·w = (0.1, -0.2, –); 1/4 worker's share.
        let (lp, mut r) = (layer(), rule(SolverType::Sgd));
        r.iter_size = 2;
        r.momentum = 0.0;
        let mut h = vec![0.0; 3];
        let mut g = vec![0.8; 3];
        let step = Step { rate: 1.0, iter: 0, scale: 0.25, clip: 0.5 };
        layer_delta(&lp, &r, step, &[1.0, -2.0, 5.0], &mut g, &mut h);
        close(&g, &[-0.25 * 0.3, -0.25 * 0.0, -0.25 * 2.0 * 0.2]);
    }

    #[test]
    fn two_history_slots_for_adadelta_and_adam_only() {
        let slots = |k| rule(k).history_slots();
        assert_eq!(slots(SolverType::Adam), 2);
        assert_eq!(slots(SolverType::AdaDelta), 2);
        for k in [SolverType::Sgd, SolverType::Nesterov, SolverType::AdaGrad, SolverType::RmsProp] {
            assert_eq!(slots(k), 1, "{k:?}");
        }
        let mut r = rule(SolverType::Sgd);
        assert!(!r.accumulates());
        r.clip_gradients = Some(1.0);
        assert!(r.accumulates());
        r.clip_gradients = None;
        r.iter_size = 3;
        assert!(r.accumulates());
    }

    #[test]
    fn adam_uses_the_second_history_slot() {
        // Adam, w = 0 (no decay), g = 0.5 on the weights: m = 0.05,
        // v = 0.00025, correction(t = 1) = sqrt(0.001) / 0.1;
        // update = rate·correction·m / (sqrt(v) + 1e-8).
        let (lp, r) = (layer(), rule(SolverType::Adam));
        let mut h = vec![0.0; 6];
        let mut g = vec![0.5; 3];
        let step = Step { rate: 0.01, iter: 0, scale: 1.0, clip: 1.0 };
        layer_delta(&lp, &r, step, &[0.0; 3], &mut g, &mut h);
        let c = 0.001f64.sqrt() / 0.1;
        let u = |rate: f64| rate * c * 0.05 / (0.00025f64.sqrt() + 1e-8);
        close(&g, &[-u(0.01), -u(0.01), -u(0.02)]);
        close(&h, &[0.05, 0.05, 0.05, 0.00025, 0.00025, 0.00025]);
    }
}

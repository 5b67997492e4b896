//! SGD as Caffe's SGDSolver does it: the learning rate at an iteration under
//! each policy, L2 weight decay, momentum, and the step written as a delta
//! (what geeps adds to the parameters). With N workers each contributes its
//! gradient scaled by 1/N and keeps its own momentum history; the deltas of
//! one clock then add up exactly to one momentum step on the averaged
//! gradient. It owns that arithmetic; it must never touch storage.

use crate::params::LayerParams;
use crate::proto::solver::{LrPolicy, SolverParam};

/// The learning rate at iteration `iter` (Caffe's GetLearningRate).
pub fn learning_rate(s: &SolverParam, iter: u64) -> f32 {
    let base = s.base_lr;
    match &s.lr_policy {
        LrPolicy::Fixed => base,
        LrPolicy::Step { gamma, stepsize } => base * gamma.powi((iter / stepsize) as i32),
        LrPolicy::Inv { gamma, power } => base * (1.0 + gamma * iter as f32).powf(-power),
        LrPolicy::MultiStep { gamma, stepvalues } => {
            base * gamma.powi(stepvalues.iter().filter(|v| iter >= **v).count() as i32)
        }
    }
}

/// The settings of one step.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub rate: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    /// 1 / number of workers.
    pub scale: f32,
}

/// Turns the gradient in `grad_delta` into the parameter delta, in place:
/// g += decay·w; h = momentum·h + rate·scale·g; delta = −h.
pub fn sgd_delta(lp: &LayerParams, step: Step, w: &[f32], grad_delta: &mut [f32], history: &mut [f32]) {
    for b in &lp.blobs {
        let r = b.offset..b.offset + b.len;
        let rate = step.rate * b.spec.lr_mult * step.scale;
        let decay = step.weight_decay * b.spec.decay_mult;
        for ((g, h), wi) in grad_delta[r.clone()].iter_mut().zip(&mut history[r.clone()]).zip(&w[r]) {
            *h = step.momentum * *h + rate * (*g + decay * wi);
            *g = -*h;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn solver(policy: LrPolicy) -> SolverParam {
        SolverParam {
            net: PathBuf::new(),
            base_lr: 0.01,
            momentum: 0.9,
            weight_decay: 0.0,
            lr_policy: policy,
            max_iter: 1,
            display: 0,
            average_loss: 1,
            test_iter: 0,
            test_interval: 0,
            test_initialization: false,
            snapshot: 0,
            snapshot_prefix: String::new(),
            snapshot_after_train: false,
            random_seed: None,
            gpu: None,
            file: PathBuf::new(),
        }
    }

    #[test]
    fn policies_follow_caffe() {
        let close = |a: f32, b: f32| (a - b).abs() < 1e-7;
        assert!(close(learning_rate(&solver(LrPolicy::Fixed), 500), 0.01));
        let step = solver(LrPolicy::Step { gamma: 0.1, stepsize: 100 });
        assert!(close(learning_rate(&step, 99), 0.01) && close(learning_rate(&step, 100), 0.001));
        let inv = solver(LrPolicy::Inv { gamma: 0.0001, power: 0.75 });
        assert!(close(learning_rate(&inv, 10000), 0.01 * 2f32.powf(-0.75)));
        let ms = solver(LrPolicy::MultiStep { gamma: 0.5, stepvalues: vec![10, 20] });
        assert!(close(learning_rate(&ms, 9), 0.01) && close(learning_rate(&ms, 10), 0.005));
        assert!(close(learning_rate(&ms, 25), 0.0025));
    }
}

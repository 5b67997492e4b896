//! The learning rate at an iteration under each of Caffe's policies
//! (SGDSolver::GetLearningRate). It owns those formulas; it must never check
//! the solver's fields (`proto/solver.rs` does).

use crate::proto::solver::{LrPolicy, SolverParam};

/// The learning rate at iteration `iter`.
pub fn learning_rate(s: &SolverParam, iter: u64) -> f32 {
    let base = s.base_lr;
    match &s.lr_policy {
        LrPolicy::Fixed => base,
        LrPolicy::Step { gamma, stepsize } => base * gamma.powi((iter / stepsize) as i32),
        LrPolicy::Inv { gamma, power } => base * (1.0 + gamma * iter as f32).powf(-power),
        LrPolicy::MultiStep { gamma, stepvalues } => {
            base * gamma.powi(stepvalues.iter().filter(|v| iter >= **v).count() as i32)
        }
        // Caffe's pow(float, int) runs in double.
        LrPolicy::Exp { gamma } => (base as f64 * (*gamma as f64).powf(iter as f64)) as f32,
        LrPolicy::Poly { power } => base * (1.0 - iter as f32 / s.max_iter as f32).powf(*power),
        LrPolicy::Sigmoid { gamma, stepsize } => {
            base * (1.0 / (1.0 + (-gamma * (iter as f32 - *stepsize as f32)).exp()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::solver::{Regularization, SolverType};
    use std::path::PathBuf;

    fn solver(policy: LrPolicy) -> SolverParam {
        SolverParam {
            net: PathBuf::new(),
            solver_type: SolverType::Sgd,
            base_lr: 0.01,
            momentum: 0.9,
            momentum2: 0.999,
            delta: 1e-8,
            rms_decay: 0.99,
            weight_decay: 0.0,
            regularization: Regularization::L2,
            clip_gradients: None,
            iter_size: 1,
            lr_policy: policy,
            max_iter: 1000,
            display: 0,
            average_loss: 1,
            test_nets: Vec::new(),
            test_interval: 0,
            test_initialization: false,
            test_compute_loss: false,
            snapshot: 0,
            snapshot_prefix: String::new(),
            snapshot_hdf5: false,
            snapshot_after_train: false,
            random_seed: None,
            gpu: None,
            train_state: crate::proto::net_state::NetState::phase(crate::proto::net::Phase::Train),
            file: PathBuf::new(),
        }
    }

    fn close(a: f32, b: f64) -> bool {
        (a as f64 - b).abs() <= 1e-6 * b.abs().max(1e-6)
    }

    #[test]
    fn fixed_step_inv_multistep() {
        assert!(close(learning_rate(&solver(LrPolicy::Fixed), 500), 0.01));
        let step = solver(LrPolicy::Step { gamma: 0.1, stepsize: 100 });
        assert!(close(learning_rate(&step, 99), 0.01) && close(learning_rate(&step, 100), 0.001));
        assert!(close(learning_rate(&step, 250), 0.0001));
        let inv = solver(LrPolicy::Inv { gamma: 0.0001, power: 0.75 });
        assert!(close(learning_rate(&inv, 0), 0.01));
        // (1 + 0.0001·10000)^−0.75 = 2^−0.75 = 0.594603557…
        assert!(close(learning_rate(&inv, 10000), 0.01 * 0.594_603_557_501_360_5));
        let ms = solver(LrPolicy::MultiStep { gamma: 0.5, stepvalues: vec![10, 20] });
        assert!(close(learning_rate(&ms, 9), 0.01) && close(learning_rate(&ms, 10), 0.005));
        assert!(close(learning_rate(&ms, 25), 0.0025));
    }

    #[test]
    fn exp_decays_every_iteration() {
        let exp = solver(LrPolicy::Exp { gamma: 0.99 });
        assert!(close(learning_rate(&exp, 0), 0.01));
        assert!(close(learning_rate(&exp, 1), 0.0099));
        assert!(close(learning_rate(&exp, 2), 0.009801));
        // 0.99^100 = 0.366032341…
        assert!(close(learning_rate(&exp, 100), 0.01 * 0.366_032_341_273_229_4));
    }

    #[test]
    fn poly_reaches_zero_at_max_iter() {
        let poly = solver(LrPolicy::Poly { power: 2.0 });
        assert!(close(learning_rate(&poly, 0), 0.01));
        // (1 − 250/1000)² = 0.5625; (1 − 500/1000)² = 0.25
        assert!(close(learning_rate(&poly, 250), 0.005625));
        assert!(close(learning_rate(&poly, 500), 0.0025));
        assert_eq!(learning_rate(&poly, 1000), 0.0);
        let linear = solver(LrPolicy::Poly { power: 1.0 });
        assert!(close(learning_rate(&linear, 900), 0.001));
    }

    #[test]
    fn sigmoid_is_half_at_stepsize() {
        let sig = solver(LrPolicy::Sigmoid { gamma: 0.05, stepsize: 100 });
        assert!(close(learning_rate(&sig, 100), 0.005));
        // 1 / (1 + e^5) = 0.006692850924…, 1 / (1 + e^−5) = 0.993307149…
        assert!(close(learning_rate(&sig, 0), 0.01 * 0.006_692_850_924_284_856));
        assert!(close(learning_rate(&sig, 200), 0.01 * 0.993_307_149_075_715));
        // A negative gamma would grow it; Caffe's gamma >= 0 lowers it.
        assert!(learning_rate(&sig, 300) > learning_rate(&sig, 200));
    }
}

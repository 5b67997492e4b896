//! The solvers' step on the GPU, where the gradient and the parameters
//! live: SGD and Nesterov (`sgd.cu`), AdaGrad, RMSProp, AdaDelta and Adam
//! (`adaptive.cu`), blob by blob with their lr and decay multipliers, in the
//! host solver's rounding (the same bits as `solvers::layer_delta`). It never
//! clips or accumulates across mini-batches (those solvers step on the host).

use super::{Arg, DevSlice, Gpu};
use crate::error::Result;
use crate::net::params::LayerParams;
use crate::proto::solver::{Regularization, SolverType};
use crate::solvers::{Rule, Step};

impl Gpu {
    /// The solver's step of one layer where its gradient lies, blob by blob
    /// with their multipliers, as `solvers::layer_delta` does on the host: the
    /// delta replaces the gradient in `grad`; `history` holds the solver's
    /// copies of the layer's parameter vector (one, or two for AdaDelta and Adam).
    pub fn solver_step(
        &self,
        lp: &LayerParams,
        rule: &Rule,
        step: Step,
        w: DevSlice,
        grad: DevSlice,
        history: DevSlice,
    ) -> Result<()> {
        let factor = step.clip / rule.iter_size.max(1) as f32;
        let l1 = u32::from(rule.regularization == Regularization::L1);
        let (h1, h2) = (history.prefix(lp.len)?, history.slice(lp.len * (rule.history_slots() - 1), lp.len)?);
        for b in &lp.blobs {
            let (wb, gb, hb) = (w.slice(b.offset, b.len)?, grad.slice(b.offset, b.len)?, h1.slice(b.offset, b.len)?);
            let (decay, rate) = (rule.weight_decay * b.spec.decay_mult, step.rate * b.spec.lr_mult);
            let common = [Arg::Dev(wb), Arg::Dev(gb), Arg::Dev(hb)];
            let adaptive = |kind: u32, b1: f32, b2: f32, correction: f32| -> Result<()> {
                let h2b = h2.slice(b.offset, b.len)?;
                let mut args = common.to_vec();
                args.extend([
                    Arg::Dev(h2b),
                    Arg::count(b.len)?,
                    Arg::F32(factor),
                    Arg::F32(decay),
                    Arg::U32(l1),
                    Arg::F32(step.scale),
                    Arg::F32(rate),
                    Arg::U32(kind),
                    Arg::F32(rule.delta),
                    Arg::F32(b1),
                    Arg::F32(b2),
                    Arg::F32(correction),
                ]);
                // SAFETY: the four ranges were cut to the blob's `len` floats.
                unsafe { self.launch_n("adaptive_step", b.len, &args) }
            };
            match rule.kind {
                SolverType::Sgd | SolverType::Nesterov => {
                    let mut args = common.to_vec();
                    args.extend([
                        Arg::count(b.len)?,
                        Arg::F32(factor),
                        Arg::F32(decay),
                        Arg::U32(l1),
                        Arg::F32(step.scale),
                        Arg::F32(rate),
                        Arg::F32(rule.momentum),
                        Arg::U32(u32::from(rule.kind == SolverType::Nesterov)),
                    ]);
                    // SAFETY: the three ranges were cut to the blob's `len` floats.
                    unsafe { self.launch_n("sgd_step", b.len, &args)? };
                }
                // The second history is unused by these two: any range of the right length will do.
                SolverType::AdaGrad => adaptive(0, 0.0, 0.0, 1.0)?,
                SolverType::RmsProp => adaptive(1, rule.rms_decay, 0.0, 1.0)?,
                SolverType::AdaDelta => adaptive(2, rule.momentum, 0.0, 1.0)?,
                SolverType::Adam => {
                    // As the CPU solver: Caffe's bias correction in double, at step t = iter + 1.
                    let t = (step.iter + 1) as f64;
                    let (b1, b2) = (rule.momentum, rule.momentum2);
                    let correction = ((1.0 - f64::from(b2).powf(t)).sqrt() / (1.0 - f64::from(b1).powf(t))) as f32;
                    adaptive(3, b1, b2, correction)?
                }
            }
        }
        Ok(())
    }
}

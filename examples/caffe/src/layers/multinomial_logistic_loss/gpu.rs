//! MultinomialLogisticLoss on the GPU: `multinomial_logistic_loss.cu`
//! picks each item's floored probability at its label into device scratch;
//! they come back to the host for the logs, summed in f64 in item order as
//! the CPU layer does; backward writes the gradient. The CPU layer's bits
//! (a label past the classes counts as the last class where the CPU layer
//! stops).

use super::MultinomialLogisticLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl MultinomialLogisticLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (num, dim) = (self.num, self.dim);
        let (p, labels) = (f.bottoms[0], f.bottoms[1]);
        holds(p, num * dim, "MultinomialLogisticLoss probabilities")?;
        holds(labels, num, "MultinomialLogisticLoss labels")?;
        holds(f.tops[0], 1, "MultinomialLogisticLoss top")?;
        let picked = gpu.with_scratch(num, |out| {
            let args = [Arg::Dev(p), Arg::Dev(labels), Arg::Dev(out), Arg::count(num)?, Arg::count(dim)?];
            // SAFETY: every range holds what the kernel touches (checked above).
            unsafe { gpu.launch_n("mll_picked", num, &args)? };
            gpu.download(out)
        })?;
        gpu.upload(&[self.loss(picked.into_iter())], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        if let Some(&d) = b.bottom_diffs.get(1) {
            gpu.zero(d)?;
        }
        let Some(&d) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (num, dim) = (self.num, self.dim);
        let (p, labels) = (b.bottoms[0], b.bottoms[1]);
        holds(p, num * dim, "MultinomialLogisticLoss probabilities")?;
        holds(labels, num, "MultinomialLogisticLoss labels")?;
        holds(d, num * dim, "MultinomialLogisticLoss gradient")?;
        let scale = b.loss_weight / num as f32;
        let args = [Arg::Dev(p), Arg::Dev(labels), Arg::Dev(d), Arg::count(num)?, Arg::count(dim)?, Arg::F32(scale)];
        Arg::count(num * dim)?;
        // SAFETY: as forward.
        unsafe { gpu.launch_n("mll_backward", num * dim, &args) }
    }
}

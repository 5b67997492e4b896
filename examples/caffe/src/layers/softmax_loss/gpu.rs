//! Softmax with loss on the GPU: the kernel keeps the probabilities and
//! writes each sample's −ln p[label]; the per-sample values come back to
//! the host and are summed in f64 in sample order, as the CPU layer sums
//! them, and the mean goes to the one-float top.

use super::SoftmaxLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl SoftmaxLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (num, c) = (self.num, self.classes);
        let (z, labels) = (f.bottoms[0], f.bottoms[1]);
        holds(z, num * c, "SoftmaxWithLoss scores")?;
        holds(labels, num, "SoftmaxWithLoss labels")?;
        holds(f.aux, num * c, "SoftmaxWithLoss probabilities")?;
        holds(f.tops[0], 1, "SoftmaxWithLoss top")?;
        let losses = gpu.with_scratch(num, |loss| {
            let args =
                [Arg::Dev(z), Arg::Dev(labels), Arg::Dev(f.aux), Arg::Dev(loss), Arg::count(num)?, Arg::count(c)?];
            // SAFETY: every range holds what the kernel touches (checked above; `loss` is num floats).
            unsafe { gpu.launch_n("softmax_loss_forward", num, &args)? };
            gpu.download(loss)
        })?;
        let total: f64 = losses.iter().map(|&l| f64::from(l)).sum();
        gpu.upload(&[(total / f64::from(self.norm())) as f32], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dz) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (num, c) = (self.num, self.classes);
        let labels = b.bottoms[1];
        holds(dz, num * c, "SoftmaxWithLoss gradient")?;
        holds(labels, num, "SoftmaxWithLoss labels")?;
        holds(b.aux, num * c, "SoftmaxWithLoss probabilities")?;
        let scale = b.loss_weight / self.norm();
        let args = [Arg::Dev(b.aux), Arg::Dev(labels), Arg::Dev(dz), Arg::count(num)?, Arg::count(c)?, Arg::F32(scale)];
        // SAFETY: as above.
        unsafe { gpu.launch_n("softmax_loss_backward", num * c, &args) }
    }
}

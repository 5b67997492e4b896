//! SigmoidCrossEntropyLoss on the GPU: `sigmoid_cross_entropy_loss.cu`
//! sums each item's cross-entropies into device scratch and the host sums
//! the items in f64; backward writes scale · (σ(x) − t). The device's
//! expf/log1pf and float terms differ from the CPU layer's f64 by rounding:
//! compare with a tolerance.

use super::SigmoidCrossEntropyLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl SigmoidCrossEntropyLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (x, t) = (f.bottoms[0], f.bottoms[1]);
        holds(x, self.len, "SigmoidCrossEntropyLoss scores")?;
        holds(t, self.len, "SigmoidCrossEntropyLoss targets")?;
        holds(f.tops[0], 1, "SigmoidCrossEntropyLoss top")?;
        let (items, dim) = (self.items, self.len / self.items);
        let sums = gpu.with_scratch(items, |out| {
            let args = [Arg::Dev(x), Arg::Dev(t), Arg::Dev(out), Arg::count(items)?, Arg::count(dim)?];
            // SAFETY: every range holds what the kernel touches (checked above; items · dim = len).
            unsafe { gpu.launch_n("sce_items", items, &args)? };
            gpu.download(out)
        })?;
        let loss: f64 = sums.iter().map(|&s| f64::from(s)).sum();
        gpu.upload(&[(loss / f64::from(self.divisor)) as f32], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&d) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (x, t) = (b.bottoms[0], b.bottoms[1]);
        holds(x, self.len, "SigmoidCrossEntropyLoss scores")?;
        holds(t, self.len, "SigmoidCrossEntropyLoss targets")?;
        holds(d, self.len, "SigmoidCrossEntropyLoss gradient")?;
        let scale = b.loss_weight / self.divisor;
        let args = [Arg::Dev(x), Arg::Dev(t), Arg::Dev(d), Arg::count(self.len)?, Arg::F32(scale)];
        // SAFETY: every range holds the len floats the kernel touches.
        unsafe { gpu.launch_n("sce_backward", self.len, &args) }
    }
}

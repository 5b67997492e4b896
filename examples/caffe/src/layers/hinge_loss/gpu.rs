//! HingeLoss on the GPU: `hinge_loss.cu` writes every score's hinge into
//! device scratch, and they come back to the host to be summed in f64 in
//! the CPU layer's order; backward writes the gradient. The CPU layer's
//! bits.

use super::HingeLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};
use crate::proto::standard_conf::HingeNorm;

impl HingeLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (num, dim) = (self.num, self.dim);
        let (x, labels) = (f.bottoms[0], f.bottoms[1]);
        holds(x, num * dim, "HingeLoss scores")?;
        holds(labels, num, "HingeLoss labels")?;
        holds(f.tops[0], 1, "HingeLoss top")?;
        let margins = gpu.with_scratch(num * dim, |m| {
            let args = [Arg::Dev(x), Arg::Dev(labels), Arg::Dev(m), Arg::count(num)?, Arg::count(dim)?];
            Arg::count(num * dim)?;
            // SAFETY: every range holds what the kernel touches (checked above).
            unsafe { gpu.launch_n("hinge_margins", num * dim, &args)? };
            gpu.download(m)
        })?;
        gpu.upload(&[self.loss(margins.into_iter())], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        if let Some(&d) = b.bottom_diffs.get(1) {
            gpu.zero(d)?;
        }
        let Some(&d) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (num, dim) = (self.num, self.dim);
        let (x, labels) = (b.bottoms[0], b.bottoms[1]);
        holds(x, num * dim, "HingeLoss scores")?;
        holds(labels, num, "HingeLoss labels")?;
        holds(d, num * dim, "HingeLoss gradient")?;
        let scale = b.loss_weight / num as f32;
        let args = [
            Arg::Dev(x),
            Arg::Dev(labels),
            Arg::Dev(d),
            Arg::count(num)?,
            Arg::count(dim)?,
            Arg::U32((self.norm == HingeNorm::L2).into()),
            Arg::F32(scale),
        ];
        Arg::count(num * dim)?;
        // SAFETY: as forward.
        unsafe { gpu.launch_n("hinge_backward", num * dim, &args) }
    }
}

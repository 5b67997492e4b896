//! Dropout on the GPU: the same counter-based draw as the CPU layer
//! (splitmix64 of the call's seed and the element's index), so both keep
//! the same units; the mask (scale or 0) is the backward state.

use super::Dropout;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Dropout {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        if !f.train {
            return Ok(());
        }
        let n = count(&self.shape);
        let (y, mask) = (f.tops[0], f.aux);
        holds(y, n, "Dropout top")?;
        holds(mask, n, "Dropout mask")?;
        let scale = 1.0 / (1.0 - self.ratio);
        let args =
            [Arg::Dev(y), Arg::Dev(mask), Arg::count(n)?, Arg::F32(self.ratio), Arg::F32(scale), Arg::U64(f.seed)];
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("dropout_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (mask, d) = (b.aux, b.bottom_diffs[0]);
        holds(mask, n, "Dropout mask")?;
        holds(d, n, "Dropout gradient")?;
        // SAFETY: as above.
        unsafe { gpu.launch_n("dropout_backward", n, &[Arg::Dev(mask), Arg::Dev(d), Arg::count(n)?]) }
    }
}

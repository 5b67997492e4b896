//! Softmax on the GPU: one thread per position of the axes outside the
//! softmax axis, looping along it in the CPU layer's order and roundings;
//! the device's expf differs from the CPU's exp by a few ulps.

use super::Softmax;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Softmax {
    fn sizes(&self) -> Result<[Arg; 3]> {
        Ok([Arg::count(self.outer * self.inner)?, Arg::count(self.channels)?, Arg::count(self.inner)?])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, n, "Softmax bottom")?;
        holds(y, n, "Softmax top")?;
        Arg::count(n)?;
        let mut args = vec![Arg::Dev(x), Arg::Dev(y)];
        args.extend(self.sizes()?);
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("softmax_forward", self.outer * self.inner, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let (y, dy) = (b.tops[0], b.top_diffs[0]);
        holds(y, n, "Softmax top")?;
        holds(dy, n, "Softmax top gradient")?;
        holds(dx, n, "Softmax bottom gradient")?;
        Arg::count(n)?;
        let mut args = vec![Arg::Dev(y), Arg::Dev(dy), Arg::Dev(dx)];
        args.extend(self.sizes()?);
        // SAFETY: the three ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("softmax_backward", self.outer * self.inner, &args) }
    }
}

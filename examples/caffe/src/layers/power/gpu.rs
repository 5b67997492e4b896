//! Power on the GPU: one thread per value with the CPU layer's formula and
//! roundings; the device's powf differs from the CPU's by a few ulps.

use super::{Power, PowerConf};
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Power {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, n, "Power bottom")?;
        holds(y, n, "Power top")?;
        let PowerConf { power, scale, shift } = self.conf;
        let args = [Arg::Dev(x), Arg::Dev(y), Arg::count(n)?, Arg::F32(power), Arg::F32(scale), Arg::F32(shift)];
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("power_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let (x, dy) = (b.bottoms[0], b.top_diffs[0]);
        holds(x, n, "Power bottom")?;
        holds(dy, n, "Power top gradient")?;
        holds(dx, n, "Power bottom gradient")?;
        let PowerConf { power, scale, shift } = self.conf;
        let args = [
            Arg::Dev(x),
            Arg::Dev(dy),
            Arg::Dev(dx),
            Arg::count(n)?,
            Arg::F32(power),
            Arg::F32(scale),
            Arg::F32(shift),
            Arg::F32(power * scale),
            Arg::F32(power - 1.0),
        ];
        // SAFETY: the three ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("power_backward", n, &args) }
    }
}

//! LRN on the GPU: one thread per value gathers its window (across channels
//! or within its plane) in the CPU layer's order and roundings, forward and
//! backward; the scale is the backward state, as on the CPU. Only the
//! device's powf differs from the CPU's (a few ulps).

use super::{Lrn, NormRegion};
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Lrn {
    /// The kernels' GEOMETRY argument list.
    fn geometry(&self) -> Result<Vec<Arg>> {
        let [_, c, h, w] = self.shape;
        Ok(vec![
            Arg::count(count(&self.shape))?,
            Arg::dim(c)?,
            Arg::dim(h)?,
            Arg::dim(w)?,
            Arg::dim(self.conf.local_size / 2)?,
            Arg::U32(u32::from(self.conf.region == NormRegion::WithinChannel)),
        ])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (x, y, scale) = (f.bottoms[0], f.tops[0], f.aux);
        holds(x, n, "LRN bottom")?;
        holds(y, n, "LRN top")?;
        holds(scale, n, "LRN scale")?;
        let (c0, a) = self.coefficients();
        let mut args = vec![Arg::Dev(x), Arg::Dev(y), Arg::Dev(scale)];
        args.extend(self.geometry()?);
        args.extend([Arg::F32(c0), Arg::F32(a), Arg::F32(-self.conf.beta)]);
        // SAFETY: the three ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("lrn_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let (x, y, dy, scale) = (b.bottoms[0], b.tops[0], b.top_diffs[0], b.aux);
        for (s, what) in [
            (x, "LRN bottom"),
            (y, "LRN top"),
            (dy, "LRN top gradient"),
            (scale, "LRN scale"),
            (dx, "LRN bottom gradient"),
        ] {
            holds(s, n, what)?;
        }
        let (_, a) = self.coefficients();
        // The CPU's factor, rounded as it rounds it.
        let k = 2.0 * a * self.conf.beta;
        let mut args = vec![Arg::Dev(x), Arg::Dev(y), Arg::Dev(dy), Arg::Dev(scale), Arg::Dev(dx)];
        args.extend(self.geometry()?);
        args.extend([Arg::F32(-self.conf.beta), Arg::F32(k)]);
        // SAFETY: the five ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("lrn_backward", n, &args) }
    }
}

//! MVN on the GPU: `mvn.cu`'s one block per normalised row, forward keeping
//! the mean and σ + eps in the backward state as the CPU layer does (sums
//! in a fixed order, not the CPU's: compare with a tolerance).

use super::Mvn;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

/// Threads per block of the kernels (`REDUCE_THREADS`).
const THREADS: u32 = 256;

impl Mvn {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = self.rows * self.dim;
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, n, "MVN bottom")?;
        holds(y, n, "MVN top")?;
        holds(f.aux, 2 * self.rows, "MVN statistics")?;
        Arg::count(n)?;
        let args = [
            Arg::Dev(x),
            Arg::Dev(y),
            Arg::Dev(f.aux),
            Arg::count(self.rows)?,
            Arg::count(self.dim)?,
            Arg::U32(self.conf.normalize_variance.into()),
            Arg::F32(self.conf.eps),
        ];
        // SAFETY: block r touches row r and its statistics; the ranges were checked.
        unsafe { gpu.launch_blocks("mvn_forward", self.rows, THREADS, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = self.rows * self.dim;
        holds(dx, n, "MVN bottom gradient")?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty()) else { return gpu.zero(dx.prefix(n)?) };
        holds(dy, n, "MVN top gradient")?;
        Arg::count(n)?;
        if !self.conf.normalize_variance {
            let args = [Arg::Dev(dy), Arg::Dev(dx), Arg::count(self.dim)?];
            // SAFETY: as forward.
            return unsafe { gpu.launch_blocks("mvn_backward_centered", self.rows, THREADS, &args) };
        }
        let x = b.bottoms[0];
        holds(x, n, "MVN bottom")?;
        holds(b.aux, 2 * self.rows, "MVN statistics")?;
        let args =
            [Arg::Dev(x), Arg::Dev(dy), Arg::Dev(b.aux), Arg::Dev(dx), Arg::count(self.rows)?, Arg::count(self.dim)?];
        // SAFETY: as forward.
        unsafe { gpu.launch_blocks("mvn_backward", self.rows, THREADS, &args) }
    }
}

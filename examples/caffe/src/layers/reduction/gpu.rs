//! Reduction on the GPU: `reduction.cu`'s one block per top value forward
//! (a fixed-order sum, not the CPU's: compare with a tolerance), one thread
//! per bottom value backward (the CPU layer's bits).

use super::Reduction;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};
use crate::proto::standard_conf::ReductionOp;

/// Threads per block of `reduction_forward` (`REDUCE_THREADS`).
const THREADS: u32 = 256;

impl Reduction {
    /// The kernels' op code: 0 SUM and MEAN, 1 ASUM, 2 SUMSQ.
    fn code(&self) -> u32 {
        match self.op {
            ReductionOp::Sum | ReductionOp::Mean => 0,
            ReductionOp::Asum => 1,
            ReductionOp::Sumsq => 2,
        }
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let rows = count(&self.top);
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, rows * self.dim, "Reduction bottom")?;
        holds(y, rows, "Reduction top")?;
        let args = [Arg::Dev(x), Arg::Dev(y), Arg::count(self.dim)?, Arg::U32(self.code()), Arg::F32(self.coeff)];
        // SAFETY: block r reads row r of x and writes y[r]; both ranges were checked.
        unsafe { gpu.launch_blocks("reduction_forward", rows, THREADS, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let rows = count(&self.top);
        let n = rows * self.dim;
        holds(dx, n, "Reduction bottom gradient")?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty()) else { return gpu.zero(dx.prefix(n)?) };
        holds(dy, rows, "Reduction top gradient")?;
        let (rows_arg, dim) = (Arg::count(rows)?, Arg::count(self.dim)?);
        Arg::count(n)?;
        if self.code() == 0 {
            let args = [Arg::Dev(dy), Arg::Dev(dx), rows_arg, dim, Arg::F32(self.coeff)];
            // SAFETY: the ranges hold the rows and their values (checked above).
            return unsafe { gpu.launch_n("reduction_spread", n, &args) };
        }
        let x = b.bottoms[0];
        holds(x, n, "Reduction bottom")?;
        let args =
            [Arg::Dev(x), Arg::Dev(dy), Arg::Dev(dx), rows_arg, dim, Arg::U32(self.code()), Arg::F32(self.coeff)];
        // SAFETY: as above.
        unsafe { gpu.launch_n("reduction_backward", n, &args) }
    }
}

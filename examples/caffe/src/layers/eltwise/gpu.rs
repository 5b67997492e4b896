//! Eltwise on the GPU: one launch per bottom, in the CPU layer's order and
//! roundings (the weighted sum from zero, the product from the first bottom,
//! the maximum keeping the winner's index as the CPU does), so the CPU
//! layer's bits.

use super::{Eltwise, EltwiseOp};
use crate::error::Result;
use crate::gpu::{holds, Arg, DevSlice, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

/// `y *= x` over `n` floats.
fn multiply(gpu: &Gpu, y: DevSlice, x: DevSlice, n: usize) -> Result<()> {
    holds(x, n, "Eltwise factor")?;
    holds(y, n, "Eltwise product")?;
    // SAFETY: both ranges hold the n floats the kernel touches.
    unsafe { gpu.launch_n("eltwise_multiply", n, &[Arg::Dev(y), Arg::Dev(x), Arg::count(n)?]) }
}

impl Eltwise {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let y = f.tops[0].prefix(n)?;
        for x in f.bottoms {
            holds(*x, n, "Eltwise bottom")?;
        }
        match &self.op {
            EltwiseOp::Sum(c) => {
                gpu.zero(y)?;
                for (x, k) in f.bottoms.iter().zip(c) {
                    gpu.add_scaled(y, *x, n, *k)?;
                }
            }
            EltwiseOp::Prod => {
                gpu.copy(f.bottoms[0].prefix(n)?, y)?;
                for x in &f.bottoms[1..] {
                    multiply(gpu, y, *x, n)?;
                }
            }
            EltwiseOp::Max => {
                let mask = f.aux.prefix(n)?;
                gpu.copy(f.bottoms[0].prefix(n)?, y)?;
                gpu.zero(mask)?;
                for (k, x) in f.bottoms.iter().enumerate().skip(1) {
                    let args = [Arg::Dev(y), Arg::Dev(mask), Arg::Dev(*x), Arg::count(n)?, Arg::count(k)?];
                    // SAFETY: the three ranges hold the n floats the kernel touches (checked above).
                    unsafe { gpu.launch_n("eltwise_max_forward", n, &args)? };
                }
            }
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let dy = b.top_diffs[0].prefix(n)?;
        for (k, dx) in b.bottom_diffs.iter().enumerate().take(self.bottoms) {
            if dx.is_empty() {
                continue;
            }
            let dx = dx.prefix(n)?;
            match &self.op {
                EltwiseOp::Sum(c) => {
                    let args = [Arg::Dev(dx), Arg::Dev(dy), Arg::count(n)?, Arg::F32(c[k])];
                    // SAFETY: both ranges hold the n floats the kernel touches.
                    unsafe { gpu.launch_n("eltwise_scale_copy", n, &args)? };
                }
                EltwiseOp::Prod => {
                    gpu.copy(dy, dx)?;
                    for (_, x) in b.bottoms.iter().enumerate().filter(|(j, _)| *j != k) {
                        multiply(gpu, dx, *x, n)?;
                    }
                }
                EltwiseOp::Max => {
                    let mask = b.aux.prefix(n)?;
                    let args = [Arg::Dev(dx), Arg::Dev(dy), Arg::Dev(mask), Arg::count(n)?, Arg::count(k)?];
                    // SAFETY: the three ranges hold the n floats the kernel touches.
                    unsafe { gpu.launch_n("eltwise_max_backward", n, &args)? };
                }
            }
        }
        Ok(())
    }
}

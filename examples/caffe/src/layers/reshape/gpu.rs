//! Reshape and Flatten on the GPU: device copies of the data forward and of
//! the gradient backward (nothing when both are the same memory).

use super::Reshape;
use crate::error::Result;
use crate::gpu::{DevSlice, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

/// Copies the first `n` floats of `src` into `dst` unless they are the same memory.
fn copy(gpu: &Gpu, src: DevSlice, dst: DevSlice, n: usize) -> Result<()> {
    let (src, dst) = (src.prefix(n)?, dst.prefix(n)?);
    if src.ptr == dst.ptr {
        return Ok(());
    }
    gpu.copy(src, dst)
}

impl Reshape {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        copy(gpu, f.bottoms[0], f.tops[0], count(&self.top))
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        copy(gpu, b.top_diffs[0], dx, count(&self.top))
    }
}

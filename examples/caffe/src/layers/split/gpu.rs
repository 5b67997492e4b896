//! Split on the GPU: device copies of the bottom into every top, and the
//! bottom gradient as the sum of the tops' gradients from zero in top order
//! (skipping an empty one, a branch outside every loss), as the CPU layer
//! sums them: the same bits.

use super::Split;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Split {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let x = f.bottoms[0].prefix(count(&self.shape))?;
        for t in f.tops {
            gpu.copy(x, *t)?;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let dx = dx.prefix(n)?;
        gpu.zero(dx)?;
        for dy in b.top_diffs.iter().filter(|d| !d.is_empty()) {
            gpu.add_scaled(dx, *dy, n, 1.0)?;
        }
        Ok(())
    }
}

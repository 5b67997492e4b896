//! Concat on the GPU: each bottom's rows copied into its columns of the top
//! (one launch per bottom), and back for the gradients; copies only, so the
//! CPU layer's bits.

use super::Concat;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Concat {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.top), self.top[self.axis] * inner);
        let y = f.tops[0];
        holds(y, total, "Concat top")?;
        if total == 0 {
            // An empty axis somewhere: nothing to copy (and no offset within the top).
            return Ok(());
        }
        let mut off = 0;
        for (x, shape) in f.bottoms.iter().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            gpu.copy_rows((*x, len), (y.slice(off, total - off)?, row), outer, len)?;
            off += len;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.top), self.top[self.axis] * inner);
        let dy = b.top_diffs[0];
        holds(dy, total, "Concat top gradient")?;
        if total == 0 {
            // An empty axis somewhere: nothing to copy (and no offset within the top).
            return Ok(());
        }
        let mut off = 0;
        for (dx, shape) in b.bottom_diffs.iter().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            if !dx.is_empty() {
                gpu.copy_rows((dy.slice(off, total - off)?, row), (*dx, len), outer, len)?;
            }
            off += len;
        }
        Ok(())
    }
}

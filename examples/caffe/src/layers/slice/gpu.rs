//! Slice on the GPU: each top's columns of the bottom copied out by
//! the `copy_rows` kernel Concat uses (one launch per top), and the top gradients
//! copied back (a bottom gradient zeroed first where a top has none);
//! copies only, so the CPU layer's bits.

use super::Slice;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Slice {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.bottom), self.bottom[self.axis] * inner);
        let x = f.bottoms[0];
        holds(x, total, "Slice bottom")?;
        if total == 0 {
            return Ok(());
        }
        let mut off = 0;
        for (y, &n) in f.tops.iter().zip(&self.parts) {
            let len = n * inner;
            gpu.copy_rows((x.slice(off, total - off)?, row), (*y, len), outer, len)?;
            off += len;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.bottom), self.bottom[self.axis] * inner);
        holds(dx, total, "Slice bottom gradient")?;
        if total == 0 {
            return Ok(());
        }
        let missing = |k: usize| b.top_diffs.get(k).is_none_or(|d| d.is_empty());
        if (0..self.parts.len()).any(missing) {
            gpu.zero(dx.slice(0, total)?)?;
        }
        let mut off = 0;
        for (k, &n) in self.parts.iter().enumerate() {
            let len = n * inner;
            if !missing(k) {
                gpu.copy_rows((b.top_diffs[k], len), (dx.slice(off, total - off)?, row), outer, len)?;
            }
            off += len;
        }
        Ok(())
    }
}

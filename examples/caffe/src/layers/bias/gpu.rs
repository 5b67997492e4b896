//! Bias on the GPU through the shared bias kernels: `add_bias` over the
//! (outer, bias, inner) view of the top, and β's gradient by
//! `bias_gradient` (a fixed-order block sum, not the CPU's order: compare
//! with a tolerance); the bottom's gradient, with two bottoms, is a device
//! copy of the top's.

use super::Bias;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Bias {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (n, dim) = (count(&self.shape), count(&self.bias));
        let y = f.tops[0];
        holds(y, n, "Bias top")?;
        let beta = if self.learned {
            f.params
        } else {
            gpu.copy(f.bottoms[0].prefix(n)?, y)?;
            f.bottoms[1]
        };
        gpu.add_bias(y, beta, self.outer, dim, self.inner)
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (n, dim) = (count(&self.shape), count(&self.bias));
        if self.learned {
            // In place: the top gradient in bottom_diffs[0] is also the bottom's.
            return gpu.bias_gradient(b.bottom_diffs[0], b.param_grad, self.outer, dim, self.inner);
        }
        let dy = b.top_diffs.first().copied().filter(|d| !d.is_empty());
        if let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) {
            match dy {
                Some(dy) => gpu.copy(dy.prefix(n)?, dx)?,
                None => gpu.zero(dx.prefix(n)?)?,
            }
        }
        if let Some(&db) = b.bottom_diffs.get(1).filter(|d| !d.is_empty()) {
            match dy {
                Some(dy) => gpu.bias_gradient(dy, db, self.outer, dim, self.inner)?,
                None => gpu.zero(db)?,
            }
        }
        Ok(())
    }
}

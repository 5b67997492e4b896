//! Parameter on the GPU: the blob copied to the top, and the top gradient
//! (or zeros) copied to the parameter gradient: device copies only, the
//! CPU layer's bits.

use super::Parameter;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Parameter {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        holds(f.params, n, "Parameter blob")?;
        gpu.copy(f.params.prefix(n)?, f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let grad = b.param_grad.prefix(n)?;
        match b.top_diffs.first().filter(|d| !d.is_empty()) {
            Some(&dy) => gpu.copy(dy.prefix(n)?, grad),
            None => gpu.zero(grad),
        }
    }
}

//! Convolution on the GPU: the products are `Lowered`'s (im2col and
//! batched GEMMs, a run of images at a time), the bias the shared
//! `add_bias` / `bias_gradient` kernels. Sums run in another order than
//! the CPU layer's: results agree to rounding, not bit for bit. It must
//! never launch per image.

use super::lowered::Lowered;
use super::Conv;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl Conv {
    fn lowered(&self) -> Lowered {
        Lowered { g: self.g, outputs: self.conf.num_output, group: self.conf.group, num: self.num }
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (o, p, wl) = (self.conf.num_output, self.g.col_cols(), self.weights_len());
        let (x, y, w) = (f.bottoms[0], f.tops[0], f.params);
        holds(w, wl + if self.conf.bias_term { o } else { 0 }, "Convolution parameters")?;
        self.lowered().apply(gpu, w.prefix(wl)?, x, y)?;
        if self.conf.bias_term {
            gpu.add_bias(y, w.slice(wl, o)?, self.num, o, p)?;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (o, p, wl) = (self.conf.num_output, self.g.col_cols(), self.weights_len());
        let (x, dy, w, grad) = (b.bottoms[0], b.top_diffs[0], b.params, b.param_grad);
        let dx = b.bottom_diffs.first().copied().filter(|d| !d.is_empty());
        self.lowered().transposed(gpu, w.prefix(wl)?, dy, Some((x, grad.prefix(wl)?)), dx)?;
        if self.conf.bias_term {
            gpu.bias_gradient(dy, grad.slice(wl, o)?, self.num, o, p)?;
        }
        Ok(())
    }
}

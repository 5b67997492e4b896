//! Deconvolution on the GPU through Convolution's GPU products (`Lowered`)
//! with the roles swapped: the convolution it transposes has the top as its
//! images and the bottom as its outputs, so forward is that convolution's
//! image gradient (col2im of Wᵀ·x), and backward its forward (W applied to
//! the top gradient) for the bottom gradient and its weight gradient (x ·
//! im2col(dy)ᵀ); the bias is the shared `add_bias` / `bias_gradient`. Sums
//! run in another order than the CPU layer's: results agree to rounding.
//! It must never hold GEMM code of its own.

use super::Deconv;
use crate::error::Result;
use crate::gpu::{holds, Gpu};
use crate::layers::conv::Lowered;
use crate::layers::layer::{GpuBackward, GpuForward};

impl Deconv {
    fn lowered(&self) -> Lowered {
        Lowered { g: self.g, outputs: self.channels, group: self.conf.group, num: self.num }
    }

    fn plane(&self) -> usize {
        self.g.height * self.g.width
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (o, wl) = (self.conf.num_output, self.weights_len());
        let (x, y, w) = (f.bottoms[0], f.tops[0], f.params);
        holds(w, wl + if self.conf.bias_term { o } else { 0 }, "Deconvolution parameters")?;
        self.lowered().transposed(gpu, w.prefix(wl)?, x, None, Some(y))?;
        if self.conf.bias_term {
            gpu.add_bias(y, w.slice(wl, o)?, self.num, o, self.plane())?;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (o, wl) = (self.conf.num_output, self.weights_len());
        let (x, dy, w, grad) = (b.bottoms[0], b.top_diffs[0], b.params, b.param_grad);
        let lowered = self.lowered();
        lowered.transposed(gpu, w.prefix(wl)?, x, Some((dy, grad.prefix(wl)?)), None)?;
        if let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) {
            lowered.apply(gpu, w.prefix(wl)?, dy, dx)?;
        }
        if self.conf.bias_term {
            gpu.bias_gradient(dy, grad.slice(wl, o)?, self.num, o, self.plane())?;
        }
        Ok(())
    }
}

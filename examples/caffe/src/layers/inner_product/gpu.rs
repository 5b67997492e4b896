//! Inner product on the GPU: three cuBLAS GEMMs (forward, weight gradient,
//! bottom gradient) and the bias kernels. Agrees with the CPU layer to
//! rounding (another summation order).

use super::InnerProduct;
use crate::error::Result;
use crate::gpu::{holds, Gpu, Transpose};
use crate::layers::layer::{GpuBackward, GpuForward};

impl InnerProduct {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (n, k, o) = (self.num, self.inputs, self.conf.num_output);
        let w = f.params;
        holds(w, o * k + if self.conf.bias_term { o } else { 0 }, "InnerProduct parameters")?;
        // Y (n×o) = X (n×k) · Wᵀ
        gpu.gemm(Transpose::No, Transpose::Yes, (n, o, k), 1.0, f.bottoms[0], w, 0.0, f.tops[0])?;
        if self.conf.bias_term {
            gpu.add_bias(f.tops[0], w.slice(o * k, o)?, n, o, 1)?;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (n, k, o) = (self.num, self.inputs, self.conf.num_output);
        let (dy, grad) = (b.top_diffs[0], b.param_grad);
        // dW (o×k) = dYᵀ · X
        gpu.gemm(Transpose::Yes, Transpose::No, (o, k, n), 1.0, dy, b.bottoms[0], 0.0, grad)?;
        if self.conf.bias_term {
            gpu.bias_gradient(dy, grad.slice(o * k, o)?, n, o, 1)?;
        }
        if let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) {
            // dX (n×k) = dY · W
            gpu.gemm(Transpose::No, Transpose::No, (n, k, o), 1.0, dy, b.params, 0.0, dx)?;
        }
        Ok(())
    }
}

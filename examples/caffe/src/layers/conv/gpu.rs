//! Convolution on the GPU: per image, im2col into device scratch and one
//! cuBLAS GEMM per channel group straight into the top blob; backward
//! accumulates the weight gradient over images in the GEMM (β = 1) and
//! rebuilds the bottom gradient with col2im. Sums run in another order than
//! the CPU layer's: results agree to rounding, not bit for bit.

use super::Conv;
use crate::error::Result;
use crate::gpu::{holds, Gpu, Transpose};
use crate::layers::layer::{GpuBackward, GpuForward};

impl Conv {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let g = self.g;
        let (o, k, p) = (self.conf.num_output, g.col_rows(), g.col_cols());
        let (og, kg) = self.per_group();
        let (wl, image) = (self.weights_len(), g.channels * g.height * g.width);
        let (x, y, w) = (f.bottoms[0], f.tops[0], f.params);
        holds(w, wl + if self.conf.bias_term { o } else { 0 }, "Convolution parameters")?;
        gpu.with_scratch(k * p, |col| {
            for i in 0..self.num {
                gpu.im2col(&g, x.slice(i * image, image)?, col, p)?;
                for gr in 0..self.conf.group {
                    gpu.gemm(
                        Transpose::No,
                        Transpose::No,
                        (og, p, kg),
                        1.0,
                        w.slice(gr * og * kg, og * kg)?,
                        col.slice(gr * kg * p, kg * p)?,
                        0.0,
                        y.slice((i * o + gr * og) * p, og * p)?,
                    )?;
                }
            }
            Ok(())
        })?;
        if self.conf.bias_term {
            gpu.add_bias(y, w.slice(wl, o)?, self.num, o, p)?;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let g = self.g;
        let (o, k, p) = (self.conf.num_output, g.col_rows(), g.col_cols());
        let (og, kg) = self.per_group();
        let (wl, image) = (self.weights_len(), g.channels * g.height * g.width);
        let (x, dy, w, grad) = (b.bottoms[0], b.top_diffs[0], b.params, b.param_grad);
        let dx = b.bottom_diffs.first().copied().filter(|d| !d.is_empty());
        if let Some(dx) = dx {
            gpu.zero(dx.prefix(self.num * image)?)?;
        }
        gpu.with_scratch(k * p, |col| {
            for i in 0..self.num {
                gpu.im2col(&g, x.slice(i * image, image)?, col, p)?;
                let beta = if i == 0 { 0.0 } else { 1.0 };
                for gr in 0..self.conf.group {
                    // dW_g += dY_g · col_gᵀ
                    gpu.gemm(
                        Transpose::No,
                        Transpose::Yes,
                        (og, kg, p),
                        1.0,
                        dy.slice((i * o + gr * og) * p, og * p)?,
                        col.slice(gr * kg * p, kg * p)?,
                        beta,
                        grad.slice(gr * og * kg, og * kg)?,
                    )?;
                }
                if let Some(dx) = dx {
                    for gr in 0..self.conf.group {
                        // dcol_g = W_gᵀ · dY_g (the columns are free again: stream order)
                        gpu.gemm(
                            Transpose::Yes,
                            Transpose::No,
                            (kg, p, og),
                            1.0,
                            w.slice(gr * og * kg, og * kg)?,
                            dy.slice((i * o + gr * og) * p, og * p)?,
                            0.0,
                            col.slice(gr * kg * p, kg * p)?,
                        )?;
                    }
                    gpu.col2im(&g, col, p, dx.slice(i * image, image)?)?;
                }
            }
            Ok(())
        })?;
        if self.num == 0 {
            gpu.zero(grad.prefix(wl)?)?;
        }
        if self.conf.bias_term {
            gpu.bias_gradient(dy, grad.slice(wl, o)?, self.num, o, p)?;
        }
        Ok(())
    }
}

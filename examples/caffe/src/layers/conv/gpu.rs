//! Convolution on the GPU, a run of images at a time: im2col lays the run's
//! receptive fields side by side in device scratch and one strided-batched
//! cuBLAS GEMM per channel group writes every image's output straight into
//! the top blob (a 1×1 kernel with stride 1 and no pad reads the bottom
//! itself). Backward swaps the top gradient to channel-major order so the
//! weight gradient of the whole run is one GEMM per group, and the bottom
//! gradient is one GEMM and one col2im. A run is as many images as fit the
//! GPU's scratch bound (`Gpu::scratch_bound`), so launches per minibatch
//! stay a handful. Sums run in
//! another order than the CPU layer's: results agree to rounding, not bit
//! for bit. It must never launch per image.

use super::Conv;
use crate::error::Result;
use crate::gpu::{holds, Gpu, Strided, Transpose};
use crate::layers::layer::{GpuBackward, GpuForward};

/// Images per run when each needs `per_image` floats of scratch and a run
/// may take `bound` (one image at least).
fn run_length(num: usize, per_image: usize, bound: usize) -> usize {
    (bound / per_image.max(1)).clamp(1, num.max(1))
}

impl Conv {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let g = self.g;
        let (o, k, p) = (self.conf.num_output, g.col_rows(), g.col_cols());
        let (og, kg) = self.per_group();
        let (wl, image) = (self.weights_len(), g.channels * g.height * g.width);
        let (x, y, w) = (f.bottoms[0], f.tops[0], f.params);
        holds(w, wl + if self.conf.bias_term { o } else { 0 }, "Convolution parameters")?;
        holds(x, self.num * image, "Convolution bottom")?;
        holds(y, self.num * o * p, "Convolution top")?;
        let weights =
            |gr: usize| -> Result<Strided> { Ok(Strided { at: w.slice(gr * og * kg, og * kg)?, ld: kg, stride: 0 }) };
        // Image i's output of group gr: og rows of p at (i·o + gr·og)·p.
        let outputs = |start: usize, count: usize, gr: usize| -> Result<Strided> {
            let at = y.slice((start * o + gr * og) * p, (count - 1) * o * p + og * p)?;
            Ok(Strided { at, ld: p, stride: o * p })
        };
        if self.num == 0 {
            // Nothing to compute; the bias below covers no element either.
        } else if g.is_identity() {
            // The bottom is its own column matrix: kg rows of p per group.
            for gr in 0..self.conf.group {
                let at = x.slice(gr * kg * p, (self.num - 1) * image + kg * p)?;
                let cols = Strided { at, ld: p, stride: image };
                gpu.gemm_batched(
                    (Transpose::No, Transpose::No),
                    (og, p, kg, self.num),
                    1.0,
                    weights(gr)?,
                    cols,
                    0.0,
                    outputs(0, self.num, gr)?,
                )?;
            }
        } else {
            let run = run_length(self.num, k * p, gpu.scratch_bound());
            gpu.with_scratch(k * p * run, |col| {
                for start in (0..self.num).step_by(run) {
                    let count = run.min(self.num - start);
                    let ld = count * p;
                    gpu.im2col(&g, (x.slice(start * image, count * image)?, image, count), col, ld)?;
                    for gr in 0..self.conf.group {
                        // Image i's columns of group gr: kg rows at column i·p of rows ld apart.
                        let cols = Strided { at: col.slice(gr * kg * ld, kg * ld)?, ld, stride: p };
                        gpu.gemm_batched(
                            (Transpose::No, Transpose::No),
                            (og, p, kg, count),
                            1.0,
                            weights(gr)?,
                            cols,
                            0.0,
                            outputs(start, count, gr)?,
                        )?;
                    }
                }
                Ok(())
            })?;
        }
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
        let run = run_length(self.num, (k + o) * p, gpu.scratch_bound());
        gpu.with_scratch((k + o) * p * run, |scratch| {
            for start in (0..self.num).step_by(run) {
                let count = run.min(self.num - start);
                let ld = count * p;
                let col = scratch.slice(0, k * ld)?;
                // The run's top gradient, channel-major: o rows of the count·p columns.
                let dyt = scratch.slice(k * ld, o * ld)?;
                gpu.im2col(&g, (x.slice(start * image, count * image)?, image, count), col, ld)?;
                gpu.swap_outer(dy.slice(start * o * p, count * o * p)?, dyt, (count, o, p))?;
                let beta = if start == 0 { 0.0 } else { 1.0 };
                for gr in 0..self.conf.group {
                    // dW_g += dY_g · col_gᵀ over the run's count·p columns
                    gpu.gemm(
                        Transpose::No,
                        Transpose::Yes,
                        (og, kg, ld),
                        1.0,
                        dyt.slice(gr * og * ld, og * ld)?,
                        col.slice(gr * kg * ld, kg * ld)?,
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
                            (kg, ld, og),
                            1.0,
                            w.slice(gr * og * kg, og * kg)?,
                            dyt.slice(gr * og * ld, og * ld)?,
                            0.0,
                            col.slice(gr * kg * ld, kg * ld)?,
                        )?;
                    }
                    gpu.col2im(&g, col, ld, (dx.slice(start * image, count * image)?, image, count))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_batch_within_the_scratch_bound() {
        let bound = crate::gpu::DEFAULT_SCRATCH_BOUND;
        assert_eq!(run_length(64, 35_200, bound), 64);
        assert_eq!(run_length(256, 363 * 3025, bound), 15);
        // One image larger than the bound still runs, alone.
        assert_eq!(run_length(8, bound * 2, bound), 1);
        assert_eq!(run_length(0, 100, bound), 1);
        assert_eq!(run_length(5, 1728, 4096), 2);
    }
}

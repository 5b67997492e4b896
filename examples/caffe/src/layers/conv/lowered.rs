//! A convolution lowered to GEMMs on the GPU, a run of images at a time:
//! im2col lays the run's receptive fields side by side in device scratch
//! and strided-batched cuBLAS GEMMs write every image's output straight
//! into the output blob (a 1×1 kernel with stride 1 and no pad reads the
//! images themselves), one per channel group batched over the images. Where
//! groups outnumber the images (a depthwise convolution), one GEMM batched
//! over the groups writes the run's outputs channel-major into scratch and
//! a swap puts them in place (a 1×1 kernel: one GEMM per image, batched over
//! the groups). The transposed products swap the output gradient to
//! channel-major order so the weight gradient of the whole run is one GEMM
//! batched over the groups, and the image gradient one such GEMM and one
//! col2im. A run is as many images as fit the GPU's scratch bound
//! (`Gpu::scratch_bound`), so launches per minibatch stay a handful.
//! Convolution uses it as it is; Deconvolution with the roles swapped (its
//! forward is the image gradient, its backward the forward and the weight
//! gradient). Sums run in another order than the CPU layers': results
//! agree to rounding, not bit for bit. It owns no bias and must never
//! launch per image.

use crate::error::Result;
use crate::gpu::{holds, DevSlice, Gpu, Strided, Transpose};
use crate::layers::im2col::Geometry;

/// Images per run when each needs `per_image` floats of scratch and a run
/// may take `bound` (one image at least).
fn run_length(num: usize, per_image: usize, bound: usize) -> usize {
    (bound / per_image.max(1)).clamp(1, num.max(1))
}

/// `num` images of geometry `g` on one side, `outputs` channels of
/// `g.col_cols()` values each on the other, weights `outputs` ×
/// `g.col_rows() / group` per group, groups one after the other.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lowered {
    pub g: Geometry,
    pub outputs: usize,
    pub group: usize,
    pub num: usize,
}

impl Lowered {
    /// (output channels, column rows) of one channel group.
    fn per_group(&self) -> (usize, usize) {
        (self.outputs / self.group, self.g.col_rows() / self.group)
    }

    fn image(&self) -> usize {
        self.g.channels * self.g.height * self.g.width
    }

    /// Floats of the weights.
    pub(crate) fn weights_len(&self) -> usize {
        self.outputs * self.per_group().1
    }

    /// The weights as one og × kg matrix per group, one after the other.
    fn group_weights(&self, w: DevSlice) -> Result<Strided> {
        let (og, kg) = self.per_group();
        Ok(Strided { at: w.prefix(self.weights_len())?, ld: kg, stride: og * kg })
    }

    /// `y` (num × outputs × OH·OW) = the weights `w` applied to the images
    /// `x`, overwritten.
    pub(crate) fn apply(&self, gpu: &Gpu, w: DevSlice, x: DevSlice, y: DevSlice) -> Result<()> {
        let g = self.g;
        let (o, k, p) = (self.outputs, g.col_rows(), g.col_cols());
        let (og, kg) = self.per_group();
        let image = self.image();
        holds(w, self.weights_len(), "convolution weights")?;
        holds(x, self.num * image, "convolution images")?;
        holds(y, self.num * o * p, "convolution outputs")?;
        let weights =
            |gr: usize| -> Result<Strided> { Ok(Strided { at: w.slice(gr * og * kg, og * kg)?, ld: kg, stride: 0 }) };
        // Image i's output of group gr: og rows of p at (i·o + gr·og)·p.
        let outputs = |start: usize, count: usize, gr: usize| -> Result<Strided> {
            let at = y.slice((start * o + gr * og) * p, (count - 1) * o * p + og * p)?;
            Ok(Strided { at, ld: p, stride: o * p })
        };
        if self.num == 0 {
            return Ok(());
        }
        if g.is_identity() {
            if self.group > self.num {
                // Image i is its own columns, every group in one call: group gr's
                // rows kg·p floats after group gr − 1's.
                for i in 0..self.num {
                    gpu.gemm_batched(
                        (Transpose::No, Transpose::No),
                        (og, p, kg, self.group),
                        1.0,
                        self.group_weights(w)?,
                        Strided { at: x.slice(i * image, image)?, ld: p, stride: kg * p },
                        0.0,
                        Strided { at: y.slice(i * o * p, o * p)?, ld: p, stride: og * p },
                    )?;
                }
                return Ok(());
            }
            // The images are their own column matrices: kg rows of p per group.
            for gr in 0..self.group {
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
            return Ok(());
        }
        // With more groups than images (a depthwise convolution) the run's
        // outputs are written channel-major into scratch by one GEMM batched
        // over the groups, then swapped into place.
        let channel_major_run = run_length(self.num, (k + o) * p, gpu.scratch_bound());
        let channel_major = self.group > channel_major_run;
        let (per_image, run) = if channel_major {
            ((k + o) * p, channel_major_run)
        } else {
            (k * p, run_length(self.num, k * p, gpu.scratch_bound()))
        };
        gpu.with_scratch(per_image * run, |scratch| {
            for start in (0..self.num).step_by(run) {
                let count = run.min(self.num - start);
                let ld = count * p;
                let col = scratch.slice(0, k * ld)?;
                gpu.im2col(&g, (x.slice(start * image, count * image)?, image, count), col, ld)?;
                if channel_major {
                    let ycm = scratch.slice(k * ld, o * ld)?;
                    gpu.gemm_batched(
                        (Transpose::No, Transpose::No),
                        (og, ld, kg, self.group),
                        1.0,
                        self.group_weights(w)?,
                        Strided { at: col, ld, stride: kg * ld },
                        0.0,
                        Strided { at: ycm, ld, stride: og * ld },
                    )?;
                    gpu.swap_outer(ycm, y.slice(start * o * p, count * o * p)?, (o, count, p))?;
                    continue;
                }
                for gr in 0..self.group {
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
        })
    }

    /// From the output gradient `dy` (laid out as [`Lowered::apply`]'s
    /// `y`): with `weights` = (the images `x`, `grad`), the weight gradient
    /// into `grad` (overwritten); with `dx`, the images' gradient into it
    /// (overwritten).
    pub(crate) fn transposed(
        &self,
        gpu: &Gpu,
        w: DevSlice,
        dy: DevSlice,
        weights: Option<(DevSlice, DevSlice)>,
        dx: Option<DevSlice>,
    ) -> Result<()> {
        let g = self.g;
        let (o, k, p) = (self.outputs, g.col_rows(), g.col_cols());
        let (og, kg) = self.per_group();
        let image = self.image();
        holds(dy, self.num * o * p, "convolution output gradient")?;
        if let Some((x, grad)) = weights {
            holds(x, self.num * image, "convolution images")?;
            holds(grad, self.weights_len(), "convolution weight gradient")?;
            if self.num == 0 {
                gpu.zero(grad.prefix(self.weights_len())?)?;
            }
        }
        if let Some(dx) = dx {
            holds(w, self.weights_len(), "convolution weights")?;
            gpu.zero(dx.prefix(self.num * image)?)?;
        }
        if self.num == 0 || (weights.is_none() && dx.is_none()) {
            return Ok(());
        }
        let run = run_length(self.num, (k + o) * p, gpu.scratch_bound());
        gpu.with_scratch((k + o) * p * run, |scratch| {
            for start in (0..self.num).step_by(run) {
                let count = run.min(self.num - start);
                let ld = count * p;
                let col = scratch.slice(0, k * ld)?;
                // The run's output gradient, channel-major: o rows of the count·p columns.
                let dyt = scratch.slice(k * ld, o * ld)?;
                gpu.swap_outer(dy.slice(start * o * p, count * o * p)?, dyt, (count, o, p))?;
                if let Some((x, grad)) = weights {
                    gpu.im2col(&g, (x.slice(start * image, count * image)?, image, count), col, ld)?;
                    let beta = if start == 0 { 0.0 } else { 1.0 };
                    // dW_g += dY_g · col_gᵀ over the run's count·p columns, every group in one call
                    gpu.gemm_batched(
                        (Transpose::No, Transpose::Yes),
                        (og, kg, ld, self.group),
                        1.0,
                        Strided { at: dyt, ld, stride: og * ld },
                        Strided { at: col, ld, stride: kg * ld },
                        beta,
                        Strided { at: grad.prefix(self.weights_len())?, ld: kg, stride: og * kg },
                    )?;
                }
                if let Some(dx) = dx {
                    // dcol_g = W_gᵀ · dY_g, every group in one call (the columns are free
                    // again: stream order)
                    gpu.gemm_batched(
                        (Transpose::Yes, Transpose::No),
                        (kg, ld, og, self.group),
                        1.0,
                        self.group_weights(w)?,
                        Strided { at: dyt, ld, stride: og * ld },
                        0.0,
                        Strided { at: col, ld, stride: kg * ld },
                    )?;
                    gpu.col2im(&g, col, ld, (dx.slice(start * image, count * image)?, image, count))?;
                }
            }
            Ok(())
        })
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

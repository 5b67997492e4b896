//! EuclideanLoss on the GPU: `euclidean_loss.cu` sums each item's squared
//! differences in double into device scratch, the host sums the items in
//! f64 (the CPU layer sums every value in f64 in one pass: compare with a
//! tolerance); backward writes ±scale · (a − b), the CPU layer's bits.

use super::EuclideanLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl EuclideanLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (a, b) = (f.bottoms[0], f.bottoms[1]);
        holds(a, self.len, "EuclideanLoss bottom a")?;
        holds(b, self.len, "EuclideanLoss bottom b")?;
        holds(f.tops[0], 1, "EuclideanLoss top")?;
        let (items, dim) = (self.num, self.len / self.num);
        let sums = gpu.with_scratch(items, |out| {
            let args = [Arg::Dev(a), Arg::Dev(b), Arg::Dev(out), Arg::count(items)?, Arg::count(dim)?];
            // SAFETY: every range holds what the kernel touches (checked above; items · dim = len).
            unsafe { gpu.launch_n("euclidean_items", items, &args)? };
            gpu.download(out)
        })?;
        let sum: f64 = sums.iter().map(|&s| f64::from(s)).sum();
        gpu.upload(&[(sum / (2.0 * self.num as f64)) as f32], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let scale = b.loss_weight / self.num as f32;
        let (x, y) = (b.bottoms[0], b.bottoms[1]);
        holds(x, self.len, "EuclideanLoss bottom a")?;
        holds(y, self.len, "EuclideanLoss bottom b")?;
        for (k, sign) in [(0, 1.0f32), (1, -1.0)] {
            if let Some(&d) = b.bottom_diffs.get(k).filter(|d| !d.is_empty()) {
                holds(d, self.len, "EuclideanLoss gradient")?;
                let args = [Arg::Dev(x), Arg::Dev(y), Arg::Dev(d), Arg::count(self.len)?, Arg::F32(sign * scale)];
                // SAFETY: every range holds the len floats the kernel touches.
                unsafe { gpu.launch_n("euclidean_backward", self.len, &args)? };
            }
        }
        Ok(())
    }
}

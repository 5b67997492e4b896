//! ContrastiveLoss on the GPU: `contrastive_loss.cu` gives each item's
//! squared distance and similarity, which come back to the host to finish
//! the loss in f64 in item order as the CPU layer does; backward, per
//! bottom of the pair, writes each item's gradient scale into device
//! scratch, then the gradient from it. The CPU layer's bits.

use super::{ContrastiveLoss, PairLoss};
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl ContrastiveLoss {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (num, dim) = (self.num, self.dim);
        let (a, b, y) = (f.bottoms[0], f.bottoms[1], f.bottoms[2]);
        holds(a, num * dim, "ContrastiveLoss bottom a")?;
        holds(b, num * dim, "ContrastiveLoss bottom b")?;
        holds(y, num, "ContrastiveLoss similarity")?;
        holds(f.tops[0], 1, "ContrastiveLoss top")?;
        let pairs = gpu.with_scratch(2 * num, |out| {
            let args = [Arg::Dev(a), Arg::Dev(b), Arg::Dev(y), Arg::Dev(out), Arg::count(num)?, Arg::count(dim)?];
            // SAFETY: every range holds what the kernel touches (checked above; `out` is 2·num floats).
            unsafe { gpu.launch_n("contrastive_forward", num, &args)? };
            gpu.download(out)
        })?;
        let items = pairs.chunks_exact(2).map(|p| PairLoss { dist_sq: p[0], similar: p[1] != 0.0 });
        gpu.upload(&[self.loss(items)], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        if let Some(&d) = b.bottom_diffs.get(2) {
            gpu.zero(d)?;
        }
        let wanted: Vec<(usize, f32)> = [(0, 1.0f32), (1, -1.0)]
            .into_iter()
            .filter(|&(k, _)| b.bottom_diffs.get(k).is_some_and(|d| !d.is_empty()))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let (num, dim) = (self.num, self.dim);
        let (x0, x1, y) = (b.bottoms[0], b.bottoms[1], b.bottoms[2]);
        holds(x0, num * dim, "ContrastiveLoss bottom a")?;
        holds(x1, num * dim, "ContrastiveLoss bottom b")?;
        holds(y, num, "ContrastiveLoss similarity")?;
        gpu.with_scratch(num, |scale| {
            for (k, sign) in wanted {
                let d = b.bottom_diffs[k];
                holds(d, num * dim, "ContrastiveLoss gradient")?;
                let alpha = sign * b.loss_weight / num.max(1) as f32;
                let args = [
                    Arg::Dev(x0),
                    Arg::Dev(x1),
                    Arg::Dev(y),
                    Arg::Dev(scale),
                    Arg::count(num)?,
                    Arg::count(dim)?,
                    Arg::F32(self.conf.margin),
                    Arg::U32(self.conf.legacy_version.into()),
                    Arg::F32(alpha),
                ];
                // SAFETY: as forward; `scale` is num floats.
                unsafe { gpu.launch_n("contrastive_scales", num, &args)? };
                let args =
                    [Arg::Dev(x0), Arg::Dev(x1), Arg::Dev(scale), Arg::Dev(d), Arg::count(num)?, Arg::count(dim)?];
                Arg::count(num * dim)?;
                // SAFETY: as above.
                unsafe { gpu.launch_n("contrastive_backward", num * dim, &args)? };
            }
            Ok(())
        })
    }
}

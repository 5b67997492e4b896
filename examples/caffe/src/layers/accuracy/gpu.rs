//! Top-k accuracy on the GPU: one thread per sample says whether it is
//! right; the host counts them (the same count as the CPU layer's).

use super::Accuracy;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::GpuForward;

impl Accuracy {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (num, c) = (self.num, self.classes);
        let (z, labels) = (f.bottoms[0], f.bottoms[1]);
        holds(z, num * c, "Accuracy scores")?;
        holds(labels, num, "Accuracy labels")?;
        holds(f.tops[0], 1, "Accuracy top")?;
        let correct = gpu.with_scratch(num, |right| {
            let args = [
                Arg::Dev(z),
                Arg::Dev(labels),
                Arg::Dev(right),
                Arg::count(num)?,
                Arg::count(c)?,
                Arg::count(self.top_k)?,
            ];
            // SAFETY: every range holds what the kernel touches.
            unsafe { gpu.launch_n("accuracy", num, &args)? };
            gpu.download(right)
        })?;
        let right = correct.iter().filter(|&&v| v > 0.5).count();
        gpu.upload(&[right as f32 / num as f32], f.tops[0])
    }
}

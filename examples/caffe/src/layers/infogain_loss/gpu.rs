//! InfogainLoss on the GPU: `infogain_loss.cu`, one thread per position,
//! writes each position's H-weighted log-probabilities into device scratch
//! (they come back to the host, negated and summed in f64 in position
//! order as the CPU layer does), and backward writes the gradient. H is the
//! third bottom, or the matrix the layer was built with, copied into the
//! same scratch first. The device's expf/logf differ from the CPU's by a
//! few ulps: compare with a tolerance.

use super::InfogainLoss;
use crate::error::Result;
use crate::gpu::{holds, Arg, DevSlice, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};

impl InfogainLoss {
    /// Runs `f` with H on the device (the bottom, or an upload of the
    /// matrix into scratch) and `extra` more floats of scratch.
    fn with_h<T>(
        &self,
        gpu: &Gpu,
        bottoms: &[DevSlice],
        extra: usize,
        f: impl FnOnce(DevSlice, DevSlice) -> Result<T>,
    ) -> Result<T> {
        let kk = self.classes * self.classes;
        match &self.matrix {
            Some(h) => gpu.with_scratch(kk + extra, |s| {
                let dev = s.prefix(kk)?;
                gpu.upload(h, dev)?;
                f(dev, s.slice(kk, extra)?)
            }),
            None => {
                let h = bottoms[2];
                holds(h, kk, "InfogainLoss matrix")?;
                gpu.with_scratch(extra, |s| f(h, s))
            }
        }
    }

    fn shape_args(&self) -> Result<[Arg; 3]> {
        Ok([Arg::count(self.outer)?, Arg::count(self.classes)?, Arg::count(self.inner)?])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let positions = self.outer * self.inner;
        let (x, labels) = (f.bottoms[0], f.bottoms[1]);
        holds(x, positions * self.classes, "InfogainLoss scores")?;
        holds(labels, positions, "InfogainLoss labels")?;
        holds(f.tops[0], 1, "InfogainLoss top")?;
        let terms = self.with_h(gpu, f.bottoms, positions, |h, out| {
            let mut args = vec![Arg::Dev(x), Arg::Dev(labels), Arg::Dev(h), Arg::Dev(out)];
            args.extend(self.shape_args()?);
            // SAFETY: every range holds what the kernel touches (checked above).
            unsafe { gpu.launch_n("infogain_forward", positions, &args)? };
            gpu.download(out)
        })?;
        let loss: f64 = terms.iter().map(|&t| -f64::from(t)).sum();
        gpu.upload(&[(loss / f64::from(self.divisor)) as f32], f.tops[0])
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        for &d in b.bottom_diffs.iter().skip(1) {
            gpu.zero(d)?;
        }
        let Some(&d) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let positions = self.outer * self.inner;
        let (x, labels) = (b.bottoms[0], b.bottoms[1]);
        holds(x, positions * self.classes, "InfogainLoss scores")?;
        holds(labels, positions, "InfogainLoss labels")?;
        holds(d, positions * self.classes, "InfogainLoss gradient")?;
        Arg::count(positions * self.classes)?;
        let scale = b.loss_weight / self.divisor;
        self.with_h(gpu, b.bottoms, 0, |h, _| {
            let mut args = vec![Arg::Dev(x), Arg::Dev(labels), Arg::Dev(h), Arg::Dev(d)];
            args.extend(self.shape_args()?);
            args.push(Arg::F32(scale));
            // SAFETY: as forward.
            unsafe { gpu.launch_n("infogain_backward", positions, &args) }
        })
    }
}

//! BatchNorm on the GPU, in place. Batch statistics: one block per channel
//! reduces its mean and variance in a fixed order (f32, where the CPU sums
//! in f64: equal to rounding), keeps them and 1/sqrt(var + eps) as the
//! backward state and normalises; backward reduces mean(dy) and mean(dy·y)
//! the same way. Global statistics: per channel and per value, with the CPU
//! layer's roundings. Backward writes the running statistics' change into
//! the parameter gradient exactly as the CPU layer does (zero with global
//! statistics).

use super::BatchNorm;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu, BLOCK};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl BatchNorm {
    /// num, channels, spatial as the kernels take them.
    fn sizes(&self) -> Result<[Arg; 3]> {
        Arg::count(count(&self.shape))?;
        Ok([Arg::count(self.num)?, Arg::count(self.channels)?, Arg::count(self.spatial)?])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (n, c) = (count(&self.shape), self.channels);
        let (y, aux) = (f.tops[0], f.aux);
        holds(y, n, "BatchNorm top")?;
        holds(aux, 3 * c, "BatchNorm statistics")?;
        if self.conf.use_global_stats {
            holds(f.params, 2 * c + 1, "BatchNorm running statistics")?;
            let args = [Arg::Dev(f.params), Arg::Dev(aux), Arg::count(c)?, Arg::F32(self.conf.eps)];
            // SAFETY: the ranges hold what the kernel touches (checked above).
            unsafe { gpu.launch_n("batch_norm_global_stats", c, &args)? };
            let args = [Arg::Dev(y), Arg::Dev(aux), Arg::count(n)?, Arg::count(c)?, Arg::count(self.spatial)?];
            // SAFETY: as above.
            unsafe { gpu.launch_n("batch_norm_apply", n, &args) }
        } else {
            let mut args = vec![Arg::Dev(y), Arg::Dev(aux)];
            args.extend(self.sizes()?);
            args.push(Arg::F32(self.conf.eps));
            // SAFETY: as above; one block per channel, each touching only its own values.
            unsafe { gpu.launch_blocks("batch_norm_train_forward", c, BLOCK, &args) }
        }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (n, c) = (count(&self.shape), self.channels);
        holds(b.aux, 3 * c, "BatchNorm statistics")?;
        let grad = b.param_grad.prefix(2 * c + 1)?;
        if self.conf.use_global_stats {
            gpu.zero(grad)?;
        } else {
            holds(b.params, 2 * c + 1, "BatchNorm running statistics")?;
            // The CPU layer's factors, rounded as it rounds them.
            let keep = self.conf.moving_average_fraction - 1.0;
            let m = self.per_channel() as f32;
            let unbias = if m > 1.0 { m / (m - 1.0) } else { 1.0 };
            let args =
                [Arg::Dev(b.params), Arg::Dev(b.aux), Arg::Dev(grad), Arg::count(c)?, Arg::F32(keep), Arg::F32(unbias)];
            // SAFETY: the ranges hold the 2c + 1 (and 2c) floats the kernel touches.
            unsafe { gpu.launch_n("batch_norm_update", 2 * c + 1, &args)? };
        }
        let Some(d) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        holds(d, n, "BatchNorm gradient")?;
        if self.conf.use_global_stats {
            let args = [Arg::Dev(d), Arg::Dev(b.aux), Arg::count(n)?, Arg::count(c)?, Arg::count(self.spatial)?];
            // SAFETY: the ranges hold what the kernel touches (checked above).
            return unsafe { gpu.launch_n("batch_norm_global_backward", n, &args) };
        }
        let y = b.tops[0];
        holds(y, n, "BatchNorm top")?;
        let mut args = vec![Arg::Dev(y), Arg::Dev(d), Arg::Dev(b.aux)];
        args.extend(self.sizes()?);
        // SAFETY: as above; one block per channel, each touching only its own values.
        unsafe { gpu.launch_blocks("batch_norm_train_backward", c, BLOCK, &args) }
    }
}

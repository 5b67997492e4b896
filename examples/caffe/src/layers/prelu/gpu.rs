//! PReLU on the GPU, in place: forward keeps the input as the backward
//! state; backward runs one block per channel that owns its values, scaling
//! the gradient and reducing the slope's gradient in a fixed order (a
//! shared slope then sums the channels' totals in channel order in device
//! scratch). The same every run; not the CPU's summation order, so the
//! slope gradient equals the CPU's to rounding.

use super::PRelu;
use crate::error::Result;
use crate::gpu::{holds, Arg, DevSlice, Gpu, BLOCK};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl PRelu {
    fn slopes(&self) -> usize {
        if self.shared {
            1
        } else {
            self.channels
        }
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (y, x_keep) = (f.tops[0], f.aux);
        holds(y, n, "PReLU top")?;
        holds(x_keep, n, "PReLU input copy")?;
        holds(f.params, self.slopes(), "PReLU slopes")?;
        let args = [
            Arg::Dev(y),
            Arg::Dev(x_keep),
            Arg::Dev(f.params),
            Arg::count(n)?,
            Arg::count(self.channels)?,
            Arg::count(self.inner.max(1))?,
            Arg::U32(u32::from(self.shared)),
        ];
        // SAFETY: the ranges hold what the kernel touches (checked above).
        unsafe { gpu.launch_n("prelu_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        // As on the CPU: without a gradient to pass on there is nothing to compute.
        let Some(d) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let c = self.channels;
        holds(d, n, "PReLU gradient")?;
        holds(b.aux, n, "PReLU input copy")?;
        holds(b.params, self.slopes(), "PReLU slopes")?;
        holds(b.param_grad, self.slopes(), "PReLU slope gradient")?;
        Arg::count(n)?;
        let backward = |sums: DevSlice| -> Result<()> {
            let args = [
                Arg::Dev(b.aux),
                Arg::Dev(d),
                Arg::Dev(b.params),
                Arg::Dev(sums),
                Arg::count(self.shape[0])?,
                Arg::count(c)?,
                Arg::count(self.inner.max(1))?,
                Arg::U32(u32::from(self.shared)),
            ];
            // SAFETY: one block per channel, each touching only its own
            // values and `sums[channel]`; `sums` holds `c` floats.
            unsafe { gpu.launch_blocks("prelu_backward", c, BLOCK, &args) }
        };
        if !self.shared {
            return backward(b.param_grad);
        }
        gpu.with_scratch(c, |sums| {
            holds(sums, c, "PReLU channel sums")?;
            backward(sums)?;
            let args = [Arg::Dev(sums), Arg::count(c)?, Arg::Dev(b.param_grad)];
            // SAFETY: one block reading `c` sums and writing the one slope gradient.
            unsafe { gpu.launch_blocks("prelu_sum", 1, BLOCK, &args) }
        })
    }
}

//! Scale on the GPU, in place: forward keeps the input as the backward
//! state and applies γ (and β) per value with the CPU layer's roundings;
//! backward runs one block per parameter that owns all its values, reducing
//! γ's and β's gradients in a fixed order (the same every run, not the
//! CPU's order: equal to rounding) and scaling the gradient by γ.

use super::Scale;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu, BLOCK};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Scale {
    /// Parameter floats: γ, and β with a bias.
    fn param_len(&self) -> usize {
        if self.conf.bias_term {
            2 * self.dim()
        } else {
            self.dim()
        }
    }

    /// outer, dim, inner and whether there is a bias, as the kernels take them.
    fn sizes(&self) -> Result<[Arg; 4]> {
        Arg::count(count(&self.shape))?;
        Ok([
            Arg::count(self.outer)?,
            Arg::count(self.dim())?,
            Arg::count(self.inner)?,
            Arg::U32(u32::from(self.conf.bias_term)),
        ])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (y, x_keep) = (f.tops[0], f.aux);
        holds(y, n, "Scale top")?;
        holds(x_keep, n, "Scale input copy")?;
        holds(f.params, self.param_len(), "Scale parameters")?;
        let mut args = vec![Arg::Dev(y), Arg::Dev(x_keep), Arg::Dev(f.params)];
        args.extend(self.sizes()?);
        // SAFETY: the ranges hold what the kernel touches (checked above).
        unsafe { gpu.launch_n("scale_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        // As on the CPU: without a gradient to pass on there is nothing to compute.
        let Some(d) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        holds(d, n, "Scale gradient")?;
        holds(b.aux, n, "Scale input copy")?;
        holds(b.params, self.param_len(), "Scale parameters")?;
        holds(b.param_grad, self.param_len(), "Scale parameter gradient")?;
        let mut args = vec![Arg::Dev(b.aux), Arg::Dev(d), Arg::Dev(b.params), Arg::Dev(b.param_grad)];
        args.extend(self.sizes()?);
        // SAFETY: as above; one block per parameter, each touching only its own values.
        unsafe { gpu.launch_blocks("scale_backward", self.dim(), BLOCK, &args) }
    }
}

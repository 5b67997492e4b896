//! Embed on the GPU: `embed.cu`'s row gather forward and its per-column
//! scatter backward (indexes in bottom order, no atomics): the CPU layer's
//! bits. An index outside the table gives a row of NaN (the trainer's
//! non-finite check stops the run), where the CPU layer stops at once.

use super::Embed;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Embed {
    fn params_len(&self) -> usize {
        let n = self.conf.num_output;
        self.conf.input_dim * n + if self.conf.bias_term { n } else { 0 }
    }

    fn shape_args(&self) -> Result<[Arg; 4]> {
        Ok([
            Arg::count(count(&self.bottom))?,
            Arg::count(self.conf.num_output)?,
            Arg::count(self.conf.input_dim)?,
            Arg::U32(self.conf.bias_term.into()),
        ])
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (m, n) = (count(&self.bottom), self.conf.num_output);
        let (idx, y) = (f.bottoms[0], f.tops[0]);
        holds(idx, m, "Embed indexes")?;
        holds(y, m * n, "Embed top")?;
        holds(f.params, self.params_len(), "Embed parameters")?;
        Arg::count(m * n)?;
        let mut args = vec![Arg::Dev(idx), Arg::Dev(f.params), Arg::Dev(y)];
        args.extend(self.shape_args()?);
        // SAFETY: every range holds what the kernel touches (checked above).
        unsafe { gpu.launch_n("embed_forward", m * n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        if let Some(&dx) = b.bottom_diffs.first() {
            gpu.zero(dx)?;
        }
        let (m, n) = (count(&self.bottom), self.conf.num_output);
        let grad = b.param_grad.prefix(self.params_len())?;
        gpu.zero(grad)?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let idx = b.bottoms[0];
        holds(idx, m, "Embed indexes")?;
        holds(dy, m * n, "Embed top gradient")?;
        Arg::count(m * n)?;
        let mut args = vec![Arg::Dev(idx), Arg::Dev(dy), Arg::Dev(grad)];
        args.extend(self.shape_args()?);
        // SAFETY: as above; thread j touches column j of the table and bias j only.
        unsafe { gpu.launch_n("embed_backward", n, &args) }
    }
}

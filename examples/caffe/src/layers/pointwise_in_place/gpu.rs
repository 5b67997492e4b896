//! Exp and ELU on the GPU, in place on the top blob (the caller copies the
//! bottom in first when they are not in place): `pointwise_in_place.cu`'s
//! one thread per value, backward from the top data. Backward gives the
//! CPU layer's bits; forward uses the device's expf/expm1f (a few ulps
//! from the CPU's).

use super::PointwiseInPlace;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};
use crate::proto::layer_spec::NeuronFn;

impl PointwiseInPlace {
    /// The kernels' op code and constants: Exp's (ln base · scale, base^shift), ELU's (alpha, 0).
    fn code(&self) -> (u32, f32, f32) {
        match self.f {
            NeuronFn::Elu(alpha) => (1, alpha, 0.0),
            _ => {
                let (inner, outer) = self.exp_scales();
                (0, inner, outer)
            }
        }
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let y = f.tops[0];
        holds(y, n, "pointwise top")?;
        let (op, a, b) = self.code();
        let args = [Arg::Dev(y), Arg::count(n)?, Arg::U32(op), Arg::F32(a), Arg::F32(b)];
        // SAFETY: `y` holds the n floats the kernel touches.
        unsafe { gpu.launch_n("in_place_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&d) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let y = b.tops[0];
        holds(y, n, "pointwise top")?;
        holds(d, n, "pointwise gradient")?;
        let (op, a, _) = self.code();
        let args = [Arg::Dev(y), Arg::Dev(d), Arg::count(n)?, Arg::U32(op), Arg::F32(a)];
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("in_place_backward", n, &args) }
    }
}

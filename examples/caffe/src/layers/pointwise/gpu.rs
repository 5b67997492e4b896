//! AbsVal, BNLL, Log and Threshold on the GPU: `pointwise.cu`'s one thread
//! per value, out of place, backward from the bottom data. AbsVal and
//! Threshold give the CPU layer's bits; BNLL and Log use the device's
//! expf/log1pf/logf (a few ulps from the CPU's).

use super::{ln_base, Pointwise};
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};
use crate::proto::layer_spec::NeuronFn;

impl Pointwise {
    /// The kernels' op code and its three constants.
    fn code(&self) -> (u32, [f32; 3]) {
        match self.f {
            NeuronFn::AbsVal => (0, [0.0; 3]),
            NeuronFn::Bnll => (1, [0.0; 3]),
            NeuronFn::Log { base, scale, shift } => (2, [shift, scale, ln_base(base)]),
            NeuronFn::Threshold(t) => (3, [t, 0.0, 0.0]),
            // `new` takes no other function.
            NeuronFn::Exp { .. } | NeuronFn::Elu(_) => (u32::MAX, [0.0; 3]),
        }
    }

    fn op_args(&self) -> Vec<Arg> {
        let (op, [a, b, c]) = self.code();
        vec![Arg::U32(op), Arg::F32(a), Arg::F32(b), Arg::F32(c)]
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, n, "pointwise bottom")?;
        holds(y, n, "pointwise top")?;
        let mut args = vec![Arg::Dev(x), Arg::Dev(y), Arg::count(n)?];
        args.extend(self.op_args());
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n("pointwise_forward", n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let n = count(&self.shape);
        let (x, dy) = (b.bottoms[0], b.top_diffs[0]);
        holds(x, n, "pointwise bottom")?;
        holds(dy, n, "pointwise top gradient")?;
        holds(dx, n, "pointwise bottom gradient")?;
        let mut args = vec![Arg::Dev(x), Arg::Dev(dy), Arg::Dev(dx), Arg::count(n)?];
        args.extend(self.op_args());
        // SAFETY: every range holds the n floats the kernel touches.
        unsafe { gpu.launch_n("pointwise_backward", n, &args) }
    }
}

//! ReLU, Sigmoid and TanH on the GPU, in place on the top blob (the caller
//! copies the bottom in first when they are not in place), backward from
//! the top data. ReLU gives the CPU layer's bits; Sigmoid and TanH use the
//! device's expf/tanhf (a few ulps from the CPU's).

use super::{Activation, Fn};
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Activation {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let y = f.tops[0];
        holds(y, n, "activation top")?;
        let (name, args) = match self.f {
            Fn::ReLU(slope) => ("relu_forward", vec![Arg::Dev(y), Arg::count(n)?, Arg::F32(slope)]),
            Fn::Sigmoid => ("sigmoid_forward", vec![Arg::Dev(y), Arg::count(n)?]),
            Fn::TanH => ("tanh_forward", vec![Arg::Dev(y), Arg::count(n)?]),
        };
        // SAFETY: `y` holds the n floats the kernel touches.
        unsafe { gpu.launch_n(name, n, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let n = count(&self.shape);
        let (y, d) = (b.tops[0], b.bottom_diffs[0]);
        holds(y, n, "activation top")?;
        holds(d, n, "activation gradient")?;
        let mut args = vec![Arg::Dev(y), Arg::Dev(d), Arg::count(n)?];
        let name = match self.f {
            Fn::ReLU(slope) => {
                args.push(Arg::F32(slope));
                "relu_backward"
            }
            Fn::Sigmoid => "sigmoid_backward",
            Fn::TanH => "tanh_backward",
        };
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { gpu.launch_n(name, n, &args) }
    }
}

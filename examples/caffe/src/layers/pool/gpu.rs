//! Pooling on the GPU: one thread per output forward (max keeps its argmax
//! in the mask), one thread per input pixel backward gathering from the
//! outputs whose windows hold it, in the CPU layer's order — the same bits
//! as the CPU layer.

use super::Pool;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{GpuBackward, GpuForward};
use crate::proto::net::PoolMethod;

impl Pool {
    /// The kernels' GEOMETRY argument list.
    fn geometry(&self) -> Result<Vec<Arg>> {
        let mut a = vec![Arg::count(self.planes())?];
        for v in [
            self.height,
            self.width,
            self.out_h,
            self.out_w,
            self.kernel.0,
            self.kernel.1,
            self.stride.0,
            self.stride.1,
            self.pad.0,
            self.pad.1,
        ] {
            a.push(Arg::dim(v)?);
        }
        Ok(a)
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (inputs, outputs) = (self.planes() * self.height * self.width, self.planes() * self.out_h * self.out_w);
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, inputs, "Pooling bottom")?;
        holds(y, outputs, "Pooling top")?;
        let mut args = vec![Arg::Dev(x), Arg::Dev(y)];
        let name = match self.method {
            PoolMethod::Max => {
                holds(f.aux, outputs, "Pooling mask")?;
                args.push(Arg::Dev(f.aux));
                "max_pool_forward"
            }
            PoolMethod::Ave => "avg_pool_forward",
        };
        args.extend(self.geometry()?);
        // SAFETY: every range was checked against the kernel's extent.
        unsafe { gpu.launch_n(name, outputs, &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(dx) = b.bottom_diffs.first().copied().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (inputs, outputs) = (self.planes() * self.height * self.width, self.planes() * self.out_h * self.out_w);
        let dy = b.top_diffs[0];
        holds(dy, outputs, "Pooling top gradient")?;
        holds(dx, inputs, "Pooling bottom gradient")?;
        let mut args = vec![Arg::Dev(dy)];
        let name = match self.method {
            PoolMethod::Max => {
                holds(b.aux, outputs, "Pooling mask")?;
                args.push(Arg::Dev(b.aux));
                "max_pool_backward"
            }
            PoolMethod::Ave => "avg_pool_backward",
        };
        args.push(Arg::Dev(dx));
        args.extend(self.geometry()?);
        // SAFETY: as above.
        unsafe { gpu.launch_n(name, inputs, &args) }
    }
}

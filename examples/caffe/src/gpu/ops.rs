//! Launch wrappers of the layer kernels shared by several layers (bias,
//! im2col/col2im, scaled sums), with the argument lists of their `.cu` files. They check
//! that every device range holds what the kernel touches, which makes the
//! launches sound; they must never launch with an unchecked range.

use super::{Arg, DevSlice, Gpu};
use crate::error::{Error, Result};
use crate::layers::im2col::Geometry;

/// Errors unless `s` holds `floats` floats.
pub fn holds(s: DevSlice, floats: usize, what: &str) -> Result<()> {
    if s.len < floats {
        return Err(Error::Gpu(format!("{what}: a device range of {} floats where {floats} are needed", s.len)));
    }
    Ok(())
}

/// Threads per block of the reductions (`REDUCE_THREADS` in bias.cu).
const REDUCE_THREADS: u32 = 256;

impl Gpu {
    /// `y (num, channels, inner) += bias[channel]`.
    pub fn add_bias(&self, y: DevSlice, bias: DevSlice, num: usize, channels: usize, inner: usize) -> Result<()> {
        holds(y, num * channels * inner, "add_bias output")?;
        holds(bias, channels, "add_bias bias")?;
        let args = [Arg::Ptr(y.ptr), Arg::Ptr(bias.ptr), Arg::count(num)?, Arg::count(channels)?, Arg::count(inner)?];
        // SAFETY: the ranges were checked above against the kernel's extent.
        unsafe { self.launch_n("add_bias", num * channels * inner, &args) }
    }

    /// `grad[c] = Σ dy[:, c, :]` over a (num, channels, inner) gradient.
    pub fn bias_gradient(&self, dy: DevSlice, grad: DevSlice, num: usize, channels: usize, inner: usize) -> Result<()> {
        holds(dy, num * channels * inner, "bias_gradient input")?;
        holds(grad, channels, "bias_gradient output")?;
        let args = [Arg::Ptr(dy.ptr), Arg::Ptr(grad.ptr), Arg::count(num)?, Arg::count(channels)?, Arg::count(inner)?];
        // SAFETY: as above; one block per channel.
        unsafe { self.launch_blocks("bias_gradient", channels, REDUCE_THREADS, &args) }
    }

    /// `y[..n] += c · x[..n]` with the CPU's rounding (no fused multiply-add).
    pub fn add_scaled(&self, y: DevSlice, x: DevSlice, n: usize, c: f32) -> Result<()> {
        holds(y, n, "add_scaled output")?;
        holds(x, n, "add_scaled input")?;
        let args = [Arg::Ptr(y.ptr), Arg::Ptr(x.ptr), Arg::count(n)?, Arg::F32(c)];
        // SAFETY: both ranges hold the n floats the kernel touches.
        unsafe { self.launch_n("add_scaled", n, &args) }
    }

    fn geometry_args(g: &Geometry) -> Result<Vec<Arg>> {
        [
            g.channels,
            g.height,
            g.width,
            g.kernel.0,
            g.kernel.1,
            g.pad.0,
            g.pad.1,
            g.stride.0,
            g.stride.1,
            g.dilation.0,
            g.dilation.1,
            g.out_h,
            g.out_w,
        ]
        .into_iter()
        .map(Arg::dim)
        .collect()
    }

    /// One image's receptive fields as columns, rows `ld` floats apart.
    pub fn im2col(&self, g: &Geometry, image: DevSlice, col: DevSlice, ld: usize) -> Result<()> {
        let rows = g.col_rows();
        holds(image, g.channels * g.height * g.width, "im2col image")?;
        holds(col, rows.saturating_sub(1) * ld + g.col_cols(), "im2col columns")?;
        let mut args = vec![Arg::Ptr(image.ptr), Arg::Ptr(col.ptr), Arg::count(ld)?];
        args.extend(Self::geometry_args(g)?);
        // SAFETY: the ranges were checked above against the kernel's extent.
        unsafe { self.launch_n("im2col", rows * g.col_cols(), &args) }
    }

    /// Adds the columns back into `image` (which the caller has set).
    pub fn col2im(&self, g: &Geometry, col: DevSlice, ld: usize, image: DevSlice) -> Result<()> {
        let rows = g.col_rows();
        holds(image, g.channels * g.height * g.width, "col2im image")?;
        holds(col, rows.saturating_sub(1) * ld + g.col_cols(), "col2im columns")?;
        let mut args = vec![Arg::Ptr(col.ptr), Arg::count(ld)?, Arg::Ptr(image.ptr)];
        args.extend(Self::geometry_args(g)?);
        // SAFETY: as above.
        unsafe { self.launch_n("col2im", g.channels * g.height * g.width, &args) }
    }
}

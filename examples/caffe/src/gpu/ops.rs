//! Launch wrappers of the layer kernels shared by several layers (bias,
//! im2col/col2im and the outer-dimension swap, scaled sums), with the argument lists of their `.cu` files. They check
//! that every device range holds what the kernel touches, which makes the
//! launches sound; they must never launch with an unchecked range.

use super::{Arg, DevSlice, Gpu, BLOCK};
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
        let args = [Arg::Dev(y), Arg::Dev(bias), Arg::count(num)?, Arg::count(channels)?, Arg::count(inner)?];
        // SAFETY: the ranges were checked above against the kernel's extent.
        unsafe { self.launch_n("add_bias", num * channels * inner, &args) }
    }

    /// `grad[c] = Σ dy[:, c, :]` over a (num, channels, inner) gradient.
    pub fn bias_gradient(&self, dy: DevSlice, grad: DevSlice, num: usize, channels: usize, inner: usize) -> Result<()> {
        holds(dy, num * channels * inner, "bias_gradient input")?;
        holds(grad, channels, "bias_gradient output")?;
        let args = [Arg::Dev(dy), Arg::Dev(grad), Arg::count(num)?, Arg::count(channels)?, Arg::count(inner)?];
        // SAFETY: as above; one block per channel.
        unsafe { self.launch_blocks("bias_gradient", channels, REDUCE_THREADS, &args) }
    }

    /// Copies `rows` runs of `len` floats, rows `src_ld` apart in `src`, to
    /// rows `dst_ld` apart in `dst` (Concat's and Slice's copies).
    pub fn copy_rows(
        &self,
        (src, src_ld): (DevSlice, usize),
        (dst, dst_ld): (DevSlice, usize),
        rows: usize,
        len: usize,
    ) -> Result<()> {
        if rows == 0 || len == 0 {
            return Ok(());
        }
        holds(src, (rows - 1) * src_ld + len, "copy_rows source")?;
        holds(dst, (rows - 1) * dst_ld + len, "copy_rows destination")?;
        let n = rows * len;
        let args = [
            Arg::Dev(src),
            Arg::count(src_ld)?,
            Arg::Dev(dst),
            Arg::count(dst_ld)?,
            Arg::count(rows)?,
            Arg::count(len)?,
        ];
        Arg::count(n)?;
        // SAFETY: both ranges were checked against the kernel's extent above.
        unsafe { self.launch_n("copy_rows", n, &args) }
    }

    /// `y[..n] += c · x[..n]` with the CPU's rounding (no fused multiply-add).
    pub fn add_scaled(&self, y: DevSlice, x: DevSlice, n: usize, c: f32) -> Result<()> {
        holds(y, n, "add_scaled output")?;
        holds(x, n, "add_scaled input")?;
        let args = [Arg::Dev(y), Arg::Dev(x), Arg::count(n)?, Arg::F32(c)];
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

    /// The receptive fields of `count` images (`image_stride` floats apart
    /// in `images`) as columns side by side: image i's columns start at
    /// column i·OH·OW of each row, rows `ld` floats apart.
    pub fn im2col(
        &self,
        g: &Geometry,
        (images, image_stride, count): (DevSlice, usize, usize),
        col: DevSlice,
        ld: usize,
    ) -> Result<()> {
        let (rows, cols) = (g.col_rows(), g.col_cols());
        Self::check_columns(g, (images, image_stride, count), col, ld, "im2col")?;
        let mut args =
            vec![Arg::Dev(images), Arg::count(image_stride)?, Arg::Dev(col), Arg::count(ld)?, Arg::count(count)?];
        args.extend(Self::geometry_args(g)?);
        let threads = Self::threads(rows * count * cols)?;
        // SAFETY: the ranges were checked above against the kernel's extent.
        unsafe { self.launch_n("im2col", threads, &args) }
    }

    /// Adds the columns of `count` images (laid out as [`Gpu::im2col`]
    /// writes them) back into the images, which the caller has set.
    pub fn col2im(
        &self,
        g: &Geometry,
        col: DevSlice,
        ld: usize,
        (images, image_stride, count): (DevSlice, usize, usize),
    ) -> Result<()> {
        Self::check_columns(g, (images, image_stride, count), col, ld, "col2im")?;
        let mut args =
            vec![Arg::Dev(col), Arg::count(ld)?, Arg::Dev(images), Arg::count(image_stride)?, Arg::count(count)?];
        args.extend(Self::geometry_args(g)?);
        let threads = Self::threads(g.channels * g.height * g.width * count)?;
        // SAFETY: as above.
        unsafe { self.launch_n("col2im", threads, &args) }
    }

    /// `dst` (b × a × inner) from `src` (a × b × inner): the two outer
    /// dimensions swapped.
    pub fn swap_outer(&self, src: DevSlice, dst: DevSlice, (a, b, inner): (usize, usize, usize)) -> Result<()> {
        let n = Self::threads(a * b * inner)?;
        holds(src, n, "swap_outer input")?;
        holds(dst, n, "swap_outer output")?;
        let args = [Arg::Dev(src), Arg::Dev(dst), Arg::count(a)?, Arg::count(b)?, Arg::count(inner)?];
        // SAFETY: both ranges hold the a·b·inner floats the kernel touches.
        unsafe { self.launch_n("swap_outer", n, &args) }
    }

    /// A thread count the kernels' 32-bit index (and its grid stride) covers.
    fn threads(n: usize) -> Result<usize> {
        if n > (u32::MAX - 4096 * BLOCK) as usize {
            return Err(Error::Gpu(format!(
                "{n} elements exceed a kernel's 32-bit index: use fewer images per launch"
            )));
        }
        Ok(n)
    }

    fn check_columns(
        g: &Geometry,
        (images, image_stride, count): (DevSlice, usize, usize),
        col: DevSlice,
        ld: usize,
        what: &str,
    ) -> Result<()> {
        let (rows, cols, image) = (g.col_rows(), g.col_cols(), g.channels * g.height * g.width);
        if count == 0 {
            return Ok(());
        }
        if image_stride < image || ld < count * cols {
            return Err(Error::Gpu(format!(
                "{what}: images {image_stride} floats apart hold {image}, rows {ld} floats apart hold {count}×{cols} columns"
            )));
        }
        holds(images, (count - 1) * image_stride + image, &format!("{what} images"))?;
        holds(col, rows.saturating_sub(1) * ld + count * cols, &format!("{what} columns"))
    }
}

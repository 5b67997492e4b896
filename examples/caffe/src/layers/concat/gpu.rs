//! Concat on the GPU: each bottom's rows copied into its columns of the top
//! (one launch per bottom), and back for the gradients; copies only, so the
//! CPU layer's bits.

use super::Concat;
use crate::error::Result;
use crate::gpu::{holds, Arg, DevSlice, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

/// Copies `rows` runs of `len` floats, rows `src_ld` apart in `src`, to
/// rows `dst_ld` apart in `dst` (Slice's copies too, the other way round).
pub(crate) fn copy_rows(
    gpu: &Gpu,
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
    let args =
        [Arg::Dev(src), Arg::count(src_ld)?, Arg::Dev(dst), Arg::count(dst_ld)?, Arg::count(rows)?, Arg::count(len)?];
    Arg::count(n)?;
    // SAFETY: both ranges were checked against the kernel's extent above.
    unsafe { gpu.launch_n("copy_rows", n, &args) }
}

impl Concat {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.top), self.top[self.axis] * inner);
        let y = f.tops[0];
        holds(y, total, "Concat top")?;
        if total == 0 {
            // An empty axis somewhere: nothing to copy (and no offset within the top).
            return Ok(());
        }
        let mut off = 0;
        for (x, shape) in f.bottoms.iter().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            copy_rows(gpu, (*x, len), (y.slice(off, total - off)?, row), outer, len)?;
            off += len;
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (total, row) = (count(&self.top), self.top[self.axis] * inner);
        let dy = b.top_diffs[0];
        holds(dy, total, "Concat top gradient")?;
        if total == 0 {
            // An empty axis somewhere: nothing to copy (and no offset within the top).
            return Ok(());
        }
        let mut off = 0;
        for (dx, shape) in b.bottom_diffs.iter().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            if !dx.is_empty() {
                copy_rows(gpu, (dy.slice(off, total - off)?, row), (*dx, len), outer, len)?;
            }
            off += len;
        }
        Ok(())
    }
}

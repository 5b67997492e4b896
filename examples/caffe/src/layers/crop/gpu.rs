//! Crop on the GPU: `crop.cu`'s one-thread-per-top-value copies over the
//! crop window, described by at most six axes (the axes the window does not
//! cut merged into the axis before them); backward zeroes the bottom
//! gradients and copies the top gradient into its window. Copies only, so
//! the CPU layer's bits.

use super::Crop;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

/// Axes of the window the kernels take.
const AXES: usize = 6;

impl Crop {
    /// The window as the kernels' WINDOW arguments (top sizes of axes 1 to
    /// 5, bottom strides of axes 0 to 5, the start), or None when more than
    /// six axes remain after merging.
    pub(super) fn window(&self) -> Option<[usize; 2 * AXES]> {
        // (top size, bottom size, offset) per merged axis.
        let mut axes: Vec<(usize, usize, usize)> = Vec::new();
        for ((&t, &b), &off) in self.top.iter().zip(&self.bottom).zip(&self.offsets) {
            match axes.last_mut() {
                // A whole axis continues the one before it.
                Some(prev) if t == b && off == 0 => *prev = (prev.0 * t, prev.1 * b, prev.2 * b),
                _ => axes.push((t, b, off)),
            }
        }
        if axes.len() > AXES {
            return None;
        }
        let mut padded = vec![(1, 1, 0); AXES - axes.len()];
        padded.extend(axes);
        let mut strides = [0usize; AXES];
        let mut stride = 1;
        for k in (0..AXES).rev() {
            strides[k] = stride;
            stride *= padded[k].1;
        }
        let base = padded.iter().zip(&strides).map(|((_, _, off), s)| off * s).sum();
        let mut w = [0usize; 2 * AXES];
        for k in 1..AXES {
            w[k - 1] = padded[k].0;
        }
        w[AXES - 1..2 * AXES - 1].copy_from_slice(&strides);
        w[2 * AXES - 1] = base;
        Some(w)
    }

    fn args(&self, from: Arg, to: Arg) -> Result<Vec<Arg>> {
        let w = self
            .window()
            .ok_or_else(|| crate::Error::Gpu(format!("Crop of {:?}: more than {AXES} cut axes", self.bottom)))?;
        let mut args = vec![from, to, Arg::count(count(&self.top))?];
        for v in w {
            args.push(Arg::count(v)?);
        }
        Ok(args)
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (x, y) = (f.bottoms[0], f.tops[0]);
        holds(x, count(&self.bottom), "Crop bottom")?;
        holds(y, count(&self.top), "Crop top")?;
        let args = self.args(Arg::Dev(x), Arg::Dev(y))?;
        // SAFETY: the window lies inside the bottom (checked at setup), the top holds every index.
        unsafe { gpu.launch_n("crop_forward", count(&self.top), &args) }
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        if let Some(&d) = b.bottom_diffs.get(1) {
            gpu.zero(d)?;
        }
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        holds(dx, count(&self.bottom), "Crop bottom gradient")?;
        gpu.zero(dx.prefix(count(&self.bottom))?)?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        holds(dy, count(&self.top), "Crop top gradient")?;
        let args = self.args(Arg::Dev(dy), Arg::Dev(dx))?;
        // SAFETY: as forward, the roles of the ranges swapped.
        unsafe { gpu.launch_n("crop_backward", count(&self.top), &args) }
    }
}

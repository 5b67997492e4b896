//! Caffe's `Crop`: the first bottom cut to the second bottom's sizes on
//! every axis from `axis` on, starting at per-axis offsets (FCNs align
//! their upsampled scores with the image this way). Backward writes the
//! top gradient into its window of a zeroed bottom gradient; the second
//! bottom only gives the shape and gets a zero gradient. It owns the
//! index arithmetic only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Crop {
    bottom: Shape,
    top: Shape,
    /// Per axis of the bottom: where the window starts (0 before `axis`).
    offsets: Vec<usize>,
}

impl Crop {
    /// `offsets`: none (0), one for every cropped axis, or one per cropped axis.
    pub fn new(axis: i64, offsets: &[usize], bottoms: &[Shape]) -> Result<Crop, String> {
        let [a, r] = bottoms else { return Err(format!("takes 2 bottom blobs, has {}", bottoms.len())) };
        if a.len() != r.len() {
            return Err(format!("the bottom {a:?} and the reference {r:?} must have as many axes"));
        }
        let start = axis_index(axis, a.len())?;
        let cropped = a.len() - start;
        if offsets.len() > 1 && offsets.len() != cropped {
            return Err(format!(
                "{} offsets for the {cropped} axes from axis {start}: give one, or one per cropped axis",
                offsets.len()
            ));
        }
        let mut top = a.clone();
        let mut offs = vec![0; a.len()];
        for i in start..a.len() {
            let off = match offsets {
                [] => 0,
                [o] => *o,
                many => many[i - start],
            };
            if a[i] < r[i] + off {
                return Err(format!(
                    "axis {i}: the reference's size {} at offset {off} runs past the bottom's {} (bottom {a:?}, reference {r:?})",
                    r[i], a[i]
                ));
            }
            top[i] = r[i];
            offs[i] = off;
        }
        Ok(Crop { bottom: a.clone(), top, offsets: offs })
    }

    /// Calls `f(bottom index, top index, run)` for every contiguous run of
    /// the last axis inside the window.
    fn runs(&self, mut f: impl FnMut(usize, usize, usize)) {
        let axes = self.top.len();
        let run = self.top[axes - 1];
        let rows = count(&self.top) / run.max(1);
        let mut idx = vec![0usize; axes];
        for row in 0..rows {
            // The top's multi-index of this row (last axis 0).
            let mut rem = row;
            for i in (0..axes - 1).rev() {
                idx[i] = rem % self.top[i];
                rem /= self.top[i];
            }
            idx[axes - 1] = 0;
            let src = (0..axes).fold(0, |src, i| src * self.bottom[i] + idx[i] + self.offsets[i]);
            f(src, row * run, run);
        }
    }
}

impl Layer for Crop {
    /// On the GPU unless more than six cut axes remain (the kernels' window).
    fn on_gpu(&self) -> bool {
        self.window().is_some()
    }

    fn forward_gpu(&self, gpu: &crate::gpu::Gpu, f: &crate::layers::GpuForward<'_>) -> crate::Result<()> {
        self.forward_on(gpu, f)
    }

    fn backward_gpu(&self, gpu: &crate::gpu::Gpu, b: &crate::layers::GpuBackward<'_>) -> crate::Result<()> {
        self.backward_on(gpu, b)
    }

    fn type_name(&self) -> &'static str {
        "Crop"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false, false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let x = f.bottoms[0];
        let y = &mut *f.tops[0];
        self.runs(|src, dst, n| y[dst..dst + n].copy_from_slice(&x[src..src + n]));
    }

    fn backward(&self, b: Backward<'_, '_>) {
        if let Some(d) = b.bottom_diffs.get_mut(1) {
            d.fill(0.0);
        }
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        dx[..count(&self.bottom)].fill(0.0);
        let dy = b.top_diffs[0];
        if dy.is_empty() {
            return;
        }
        self.runs(|src, dst, n| dx[src..src + n].copy_from_slice(&dy[dst..dst + n]));
    }
}

//! Caffe's `Slice`: one bottom cut along an axis into consecutive parts,
//! one per top, at the given points (or into equal parts); backward puts
//! each top's gradient back in its part (zero where a top has none). It
//! owns the copying only; its GPU code (`gpu.rs`) runs Concat's row copies.

mod gpu;

use crate::layers::layer::{axis_index, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Slice {
    bottom: Shape,
    axis: usize,
    /// Each top's size along the axis.
    parts: Vec<usize>,
}

impl Slice {
    /// `points`: where each top after the first starts (empty: `tops` equal parts).
    pub fn new(axis: i64, points: &[usize], tops: usize, bottom: &Shape) -> Result<Slice, String> {
        let ax = axis_index(axis, bottom.len())?;
        let dim = bottom[ax];
        if tops == 0 {
            return Err("needs at least one top".into());
        }
        let parts = if points.is_empty() {
            if dim % tops != 0 {
                return Err(format!("{tops} tops do not divide axis {ax} of size {dim} evenly; give slice_point"));
            }
            vec![dim / tops; tops]
        } else {
            if points.len() + 1 != tops {
                return Err(format!("{} slice points for {tops} tops", points.len()));
            }
            let mut parts = Vec::with_capacity(tops);
            let mut prev = 0;
            for &pt in points.iter().chain(std::iter::once(&dim)) {
                if pt <= prev {
                    return Err(format!(
                        "slice points {points:?} must rise from 1 to below axis {ax}'s size {dim} (bottom {bottom:?})"
                    ));
                }
                parts.push(pt - prev);
                prev = pt;
            }
            parts
        };
        Ok(Slice { bottom: bottom.clone(), axis: ax, parts })
    }

    /// (outer count, inner count per unit of the axis).
    fn split(&self) -> (usize, usize) {
        (self.bottom[..self.axis].iter().product(), self.bottom[self.axis + 1..].iter().product())
    }
}

impl Layer for Slice {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Slice"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        self.parts
            .iter()
            .map(|&n| {
                let mut s = self.bottom.clone();
                s[self.axis] = n;
                s
            })
            .collect()
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (outer, inner) = self.split();
        let row = self.bottom[self.axis] * inner;
        let x = f.bottoms[0];
        let mut off = 0;
        for (top, &n) in f.tops.iter_mut().zip(&self.parts) {
            let len = n * inner;
            for o in 0..outer {
                top[o * len..(o + 1) * len].copy_from_slice(&x[o * row + off..o * row + off + len]);
            }
            off += len;
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (outer, inner) = self.split();
        let row = self.bottom[self.axis] * inner;
        let mut off = 0;
        for (k, &n) in self.parts.iter().enumerate() {
            let len = n * inner;
            let dy = b.top_diffs.get(k).copied().unwrap_or(&[]);
            for o in 0..outer {
                let dst = &mut dx[o * row + off..o * row + off + len];
                if dy.is_empty() {
                    dst.fill(0.0);
                } else {
                    dst.copy_from_slice(&dy[o * len..(o + 1) * len]);
                }
            }
            off += len;
        }
    }
}

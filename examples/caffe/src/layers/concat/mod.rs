//! Concatenation along any axis (Caffe's `Concat`): the bottoms agree on
//! every other axis; backward hands each bottom its slice of the gradient.
//! It owns the copying only.

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Concat {
    bottoms: Vec<Shape>,
    axis: usize,
    top: Shape,
}

impl Concat {
    /// `axis` may count from the end (−1 is the last), as in Caffe.
    pub fn new(axis: i64, bottoms: &[Shape]) -> Result<Concat, String> {
        let first = bottoms.first().ok_or("needs at least one bottom")?;
        let ax = axis_index(axis, first.len())?;
        let mut top = first.clone();
        top[ax] = 0;
        for b in bottoms {
            let same = b.len() == first.len() && b.iter().zip(first).enumerate().all(|(i, (x, y))| i == ax || x == y);
            if !same {
                return Err(format!("bottom shapes {first:?} and {b:?} differ outside axis {ax}"));
            }
            top[ax] += b[ax];
        }
        Ok(Concat { bottoms: bottoms.to_vec(), axis: ax, top })
    }

    /// (outer count, inner count per unit of the axis).
    fn split(&self) -> (usize, usize) {
        (self.top[..self.axis].iter().product(), self.top[self.axis + 1..].iter().product())
    }
}

impl Layer for Concat {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Concat"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false; self.bottoms.len()], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (outer, inner) = self.split();
        let row = self.top[self.axis] * inner;
        let mut off = 0;
        for (b, shape) in f.bottoms.iter().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            for o in 0..outer {
                f.tops[0][o * row + off..o * row + off + len].copy_from_slice(&b[o * len..(o + 1) * len]);
            }
            off += len;
        }
        debug_assert_eq!(outer * off, count(&self.top));
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let (outer, inner) = self.split();
        let row = self.top[self.axis] * inner;
        let dy = b.top_diffs[0];
        let mut off = 0;
        for (dx, shape) in b.bottom_diffs.iter_mut().zip(&self.bottoms) {
            let len = shape[self.axis] * inner;
            if !dx.is_empty() {
                for o in 0..outer {
                    dx[o * len..(o + 1) * len].copy_from_slice(&dy[o * row + off..o * row + off + len]);
                }
            }
            off += len;
        }
    }
}

//! Split (Caffe inserts it when one blob feeds several layers): every top
//! is a copy of the bottom, and the bottom's gradient is the sum of the
//! tops' gradients. It owns that copy and sum only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Split {
    shape: Shape,
    tops: usize,
}

impl Split {
    pub fn new(tops: usize, bottom: &Shape) -> Result<Split, String> {
        if tops == 0 {
            return Err("needs at least one top".into());
        }
        Ok(Split { shape: bottom.clone(), tops })
    }
}

impl Layer for Split {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Split"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone(); self.tops]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        for t in f.tops.iter_mut() {
            t[..n].copy_from_slice(&f.bottoms[0][..n]);
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let n = count(&self.shape);
        dx[..n].fill(0.0);
        // An empty top gradient is a branch outside every loss: zero.
        for dy in b.top_diffs.iter().filter(|d| !d.is_empty()) {
            dx[..n].iter_mut().zip(&dy[..n]).for_each(|(d, g)| *d += g);
        }
    }
}

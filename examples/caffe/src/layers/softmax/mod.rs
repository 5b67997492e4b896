//! Softmax along one axis (Caffe's `Softmax`, axis 1 by default): for every
//! position of the other axes, the values along the axis become
//! probabilities; backward is `dx = y · (dy − Σ dy·y)`. It owns this math only.

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Softmax {
    shape: Shape,
    outer: usize,
    channels: usize,
    inner: usize,
}

impl Softmax {
    pub fn new(axis: i64, bottom: &Shape) -> Result<Softmax, String> {
        let a = axis_index(axis, bottom.len())?;
        Ok(Softmax {
            shape: bottom.clone(),
            outer: bottom[..a].iter().product(),
            channels: bottom[a],
            inner: bottom[a + 1..].iter().product(),
        })
    }
}

impl Layer for Softmax {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Softmax"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: true, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (c, inner) = (self.channels, self.inner);
        let x = f.bottoms[0];
        let y = &mut f.tops[0][..count(&self.shape)];
        for o in 0..self.outer {
            for i in 0..inner {
                let at = |k: usize| o * c * inner + k * inner + i;
                let max = (0..c).map(|k| x[at(k)]).fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for k in 0..c {
                    y[at(k)] = (x[at(k)] - max).exp();
                    sum += y[at(k)];
                }
                (0..c).for_each(|k| y[at(k)] /= sum);
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (c, inner) = (self.channels, self.inner);
        let (y, dy) = (b.tops[0], b.top_diffs[0]);
        for o in 0..self.outer {
            for i in 0..inner {
                let at = |k: usize| o * c * inner + k * inner + i;
                let dot: f32 = (0..c).map(|k| dy[at(k)] * y[at(k)]).sum();
                (0..c).for_each(|k| dx[at(k)] = y[at(k)] * (dy[at(k)] - dot));
            }
        }
    }
}

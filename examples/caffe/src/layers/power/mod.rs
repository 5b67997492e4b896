//! Caffe's `Power`: `y = (shift + scale · x)^power`, with
//! `dx = dy · power · scale · (shift + scale · x)^(power − 1)` (zero when
//! power or scale is 0). It owns this formula only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::PowerConf;

#[derive(Debug)]
pub struct Power {
    conf: PowerConf,
    shape: Shape,
}

impl Power {
    pub fn new(conf: PowerConf, bottom: &Shape) -> Power {
        Power { conf, shape: bottom.clone() }
    }
}

impl Layer for Power {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Power"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        let PowerConf { power, scale, shift } = self.conf;
        for (y, x) in f.tops[0][..n].iter_mut().zip(&f.bottoms[0][..n]) {
            *y = if power == 0.0 { 1.0 } else { (shift + scale * x).powf(power) };
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let n = count(&self.shape);
        let PowerConf { power, scale, shift } = self.conf;
        let k = power * scale;
        for ((d, g), x) in dx[..n].iter_mut().zip(&b.top_diffs[0][..n]).zip(&b.bottoms[0][..n]) {
            *d = if k == 0.0 {
                0.0
            } else if power == 1.0 {
                g * scale
            } else {
                g * k * (shift + scale * x).powf(power - 1.0)
            };
        }
    }
}

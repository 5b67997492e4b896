//! Caffe's `EuclideanLoss`: `‖a − b‖² / 2N` over two bottoms of one count
//! (N the first axis), with gradients `±(a − b)/N` times the loss weight to
//! both. It has GPU code (`gpu`). It
//! owns this formula only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};

pub struct EuclideanLoss {
    len: usize,
    num: usize,
}

impl EuclideanLoss {
    pub fn new(bottoms: &[Shape]) -> Result<EuclideanLoss, String> {
        let [a, b] = bottoms else { return Err(format!("takes 2 bottom blobs, has {}", bottoms.len())) };
        if count(a) != count(b) || a.is_empty() {
            return Err(format!("bottoms {a:?} and {b:?} must hold the same number of values"));
        }
        Ok(EuclideanLoss { len: count(a), num: a[0].max(1) })
    }
}

impl Layer for EuclideanLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "EuclideanLoss"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![1]]
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true, true], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (a, b) = (&f.bottoms[0][..self.len], &f.bottoms[1][..self.len]);
        let sum: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
        f.tops[0][0] = (sum / (2.0 * self.num as f64)) as f32;
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let scale = b.loss_weight / self.num as f32;
        let (x, y) = (&b.bottoms[0][..self.len], &b.bottoms[1][..self.len]);
        for (k, sign) in [(0, 1.0f32), (1, -1.0)] {
            if let Some(d) = b.bottom_diffs.get_mut(k).filter(|d| !d.is_empty()) {
                for ((d, x), y) in d[..self.len].iter_mut().zip(x).zip(y) {
                    *d = sign * scale * (x - y);
                }
            }
        }
    }
}

//! Caffe's `HingeLoss` (one-vs-all): scores N × K and labels N. With
//! t = −1 for the label's score and +1 for the others, the loss is
//! Σ max(0, 1 + t·x) / N (L1) or Σ max(0, 1 + t·x)² / N (L2); the gradient
//! goes to the scores only. It owns this formula only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::standard_conf::HingeNorm;

pub struct HingeLoss {
    norm: HingeNorm,
    num: usize,
    dim: usize,
}

impl HingeLoss {
    pub fn new(norm: HingeNorm, bottoms: &[Shape]) -> Result<HingeLoss, String> {
        let [x, l] = bottoms else {
            return Err(format!("takes 2 bottom blobs (scores, labels), has {}", bottoms.len()));
        };
        let num = x.first().copied().unwrap_or(0);
        if num == 0 || count(l) != num {
            return Err(format!("the labels {l:?} must hold one value per item of the scores {x:?}"));
        }
        Ok(HingeLoss { norm, num, dim: count(x) / num })
    }

    /// max(0, 1 + t·x) of score j of item i, with its sign t.
    fn margin(&self, x: &[f32], labels: &[f32], i: usize, j: usize) -> (f32, f32) {
        let t = if labels[i] as usize == j { -1.0 } else { 1.0 };
        ((1.0 + t * x[i * self.dim + j]).max(0.0), t)
    }

    /// The loss of every score's hinge (item by item, class by class), summed in f64.
    fn loss(&self, margins: impl Iterator<Item = f32>) -> f32 {
        let sum: f64 = margins
            .map(|m| {
                let m = f64::from(m);
                if self.norm == HingeNorm::L1 {
                    m
                } else {
                    m * m
                }
            })
            .sum();
        (sum / self.num as f64) as f32
    }
}

impl Layer for HingeLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "HingeLoss"
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
        let (x, labels) = (f.bottoms[0], f.bottoms[1]);
        let margins = (0..self.num).flat_map(|i| (0..self.dim).map(move |j| (i, j)));
        f.tops[0][0] = self.loss(margins.map(|(i, j)| self.margin(x, labels, i, j).0));
    }

    fn backward(&self, b: Backward<'_, '_>) {
        if let Some(d) = b.bottom_diffs.get_mut(1) {
            d.fill(0.0);
        }
        let Some(d) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (x, labels) = (b.bottoms[0], b.bottoms[1]);
        let scale = b.loss_weight / self.num as f32;
        for i in 0..self.num {
            for j in 0..self.dim {
                let (m, t) = self.margin(x, labels, i, j);
                // Caffe: sign(t·m) for L1 (0 where the hinge is flat), 2·t·m for L2.
                d[i * self.dim + j] = match self.norm {
                    HingeNorm::L1 if m > 0.0 => t * scale,
                    HingeNorm::L1 => 0.0,
                    HingeNorm::L2 => 2.0 * t * m * scale,
                };
            }
        }
    }
}

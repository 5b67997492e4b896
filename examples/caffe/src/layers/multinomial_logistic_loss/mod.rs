//! Caffe's `MultinomialLogisticLoss`: probabilities N × K (a Softmax's
//! output) and labels N; the loss is −Σ log max(p\[label\], 1e-20) / N and
//! the gradient −1 / max(p\[label\], 1e-20) / N at each label's probability,
//! 0 elsewhere; the labels get none. It owns this formula only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};

/// Caffe's floor under a probability before its log.
const LOG_THRESHOLD: f32 = 1e-20;

pub struct MultinomialLogisticLoss {
    num: usize,
    dim: usize,
}

impl MultinomialLogisticLoss {
    pub fn new(bottoms: &[Shape]) -> Result<MultinomialLogisticLoss, String> {
        let [p, l] = bottoms else {
            return Err(format!("takes 2 bottom blobs (probabilities, labels), has {}", bottoms.len()));
        };
        let num = p.first().copied().unwrap_or(0);
        if num == 0 || count(l) != num {
            return Err(format!("the labels {l:?} must hold one value per item of the probabilities {p:?}"));
        }
        Ok(MultinomialLogisticLoss { num, dim: count(p) / num })
    }

    fn at(&self, labels: &[f32], i: usize) -> usize {
        let l = labels[i] as usize;
        assert!(l < self.dim, "MultinomialLogisticLoss: label {} is not below the {} classes", labels[i], self.dim);
        i * self.dim + l
    }

    /// The loss of the items' floored probabilities at their labels, summed in f64.
    fn loss(&self, picked: impl Iterator<Item = f32>) -> f32 {
        let loss: f64 = picked.map(|p| -f64::from(p.ln())).sum();
        (loss / self.num as f64) as f32
    }
}

impl Layer for MultinomialLogisticLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "MultinomialLogisticLoss"
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
        let (p, labels) = (f.bottoms[0], f.bottoms[1]);
        f.tops[0][0] = self.loss((0..self.num).map(|i| p[self.at(labels, i)].max(LOG_THRESHOLD)));
    }

    fn backward(&self, b: Backward<'_, '_>) {
        if let Some(d) = b.bottom_diffs.get_mut(1) {
            d.fill(0.0);
        }
        let Some(d) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (p, labels) = (b.bottoms[0], b.bottoms[1]);
        let scale = b.loss_weight / self.num as f32;
        d[..self.num * self.dim].fill(0.0);
        for i in 0..self.num {
            let k = self.at(labels, i);
            d[k] = -scale / p[k].max(LOG_THRESHOLD);
        }
    }
}

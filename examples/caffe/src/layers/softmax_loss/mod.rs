//! Softmax followed by the multinomial logistic loss (Caffe's
//! `SoftmaxWithLoss`): loss = −mean log p\[label\], gradient (p − onehot) ×
//! loss_weight / batch. The probabilities are its backward state. Labels are
//! checked against the class count before training, not here.

mod gpu;

use crate::layers::layer::{Backward, Forward, Layer, Reads, Shape};
use crate::proto::net::Normalization;

pub struct SoftmaxLoss {
    num: usize,
    classes: usize,
    normalization: Normalization,
}

impl SoftmaxLoss {
    pub fn new(normalization: Normalization, scores: &Shape, labels: &Shape) -> Result<SoftmaxLoss, String> {
        let num = scores.first().copied().unwrap_or(0);
        if num == 0 || labels.first() != Some(&num) || labels.iter().product::<usize>() != num {
            return Err(format!("scores {scores:?} and labels {labels:?} need the same batch, one label per image"));
        }
        let classes = scores.iter().product::<usize>() / num;
        Ok(SoftmaxLoss { num, classes, normalization })
    }

    pub fn classes(&self) -> usize {
        self.classes
    }

    fn norm(&self) -> f32 {
        match self.normalization {
            Normalization::Batch => self.num as f32,
            Normalization::None => 1.0,
        }
    }
}

/// Softmax of `z` into `p`.
pub fn softmax(z: &[f32], p: &mut [f32]) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for (pi, zi) in p.iter_mut().zip(z) {
        *pi = (zi - max).exp();
        sum += *pi;
    }
    p.iter_mut().for_each(|v| *v /= sum);
}

impl Layer for SoftmaxLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "SoftmaxWithLoss"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![1]]
    }

    fn aux_len(&self) -> usize {
        self.num * self.classes
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false, true], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let c = self.classes;
        let (z, labels) = (f.bottoms[0], f.bottoms[1]);
        let mut loss = 0.0f64;
        for i in 0..self.num {
            let p = &mut f.aux[i * c..(i + 1) * c];
            softmax(&z[i * c..(i + 1) * c], p);
            let y = labels[i] as usize;
            loss -= f64::from(p[y.min(c - 1)].max(f32::MIN_POSITIVE).ln());
        }
        f.tops[0][0] = (loss / f64::from(self.norm())) as f32;
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let c = self.classes;
        let Some(dz) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let labels = b.bottoms[1];
        let scale = b.loss_weight / self.norm();
        for i in 0..self.num {
            let y = (labels[i] as usize).min(c - 1);
            let (p, d) = (&b.aux[i * c..(i + 1) * c], &mut dz[i * c..(i + 1) * c]);
            for (k, (dk, pk)) in d.iter_mut().zip(p).enumerate() {
                *dk = scale * (pk - if k == y { 1.0 } else { 0.0 });
            }
        }
    }
}

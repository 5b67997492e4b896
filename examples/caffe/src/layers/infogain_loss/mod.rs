//! Caffe's `InfogainLoss` (Caffe 1.0's, with the softmax inside): scores
//! with K classes along `axis`, labels (one per position), and the K × K
//! infogain matrix H (the third bottom, or the values the net loaded from
//! `infogain_loss_param.source`). With p = softmax(x) along the axis, the
//! loss is −Σ_positions Σ_k H[label, k] · log max(p_k, FLT_MIN) over the
//! normaliser (the positions, the batch, or 1), and the scores' gradient
//! p_k · Σ_j H[label, j] − H[label, k] times the loss weight over it.
//! Labels and H get no gradient. It owns this formula only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::layer_spec::LossNorm;

pub struct InfogainLoss {
    outer: usize,
    classes: usize,
    inner: usize,
    divisor: f32,
    /// H when it is not a bottom.
    matrix: Option<Vec<f32>>,
}

impl InfogainLoss {
    /// `matrix`: H (row-major, K × K) when the bottoms are only scores and labels.
    pub fn new(axis: i64, norm: LossNorm, matrix: Option<&[f32]>, bottoms: &[Shape]) -> Result<InfogainLoss, String> {
        let (x, labels) = match bottoms {
            [x, l] | [x, l, _] => (x, l),
            _ => return Err(format!("takes 2 or 3 bottom blobs (scores, labels, infogain), has {}", bottoms.len())),
        };
        let a = axis_index(axis, x.len())?;
        let (outer, classes, inner) = (count(&x[..a]), x[a], count(&x[a + 1..]));
        if count(labels) != outer * inner {
            return Err(format!(
                "the labels {labels:?} must hold one value per position of the scores {x:?} ({})",
                outer * inner
            ));
        }
        let matrix = match (bottoms.get(2), matrix) {
            (Some(h), _) if count(h) != classes * classes => {
                return Err(format!("the infogain bottom {h:?} must hold {classes} x {classes} values"))
            }
            (Some(_), _) => None,
            (None, Some(h)) if h.len() != classes * classes => {
                return Err(format!("the infogain matrix holds {} values, not {classes} x {classes}", h.len()))
            }
            (None, Some(h)) => Some(h.to_vec()),
            (None, None) => {
                return Err("needs the infogain matrix: a third bottom or infogain_loss_param { source }".into())
            }
        };
        let divisor = match norm {
            LossNorm::Count => outer * inner,
            LossNorm::Batch => outer,
            LossNorm::None => 1,
        };
        Ok(InfogainLoss { outer, classes, inner, divisor: divisor.max(1) as f32, matrix })
    }

    fn h<'a>(&'a self, bottoms: &[&'a [f32]]) -> &'a [f32] {
        self.matrix.as_deref().unwrap_or_else(|| bottoms[2])
    }

    /// The softmax at position (i, j) into `p` (K values).
    fn softmax(&self, x: &[f32], i: usize, j: usize, p: &mut [f32]) {
        let at = |k: usize| x[(i * self.classes + k) * self.inner + j];
        let max = (0..self.classes).map(at).fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for (k, v) in p.iter_mut().enumerate() {
            *v = (at(k) - max).exp();
            sum += *v;
        }
        p.iter_mut().for_each(|v| *v /= sum);
    }

    fn label(&self, labels: &[f32], i: usize, j: usize) -> usize {
        let l = labels[i * self.inner + j];
        assert!(
            l >= 0.0 && (l as usize) < self.classes,
            "InfogainLoss: label {l} is not below the {} classes",
            self.classes
        );
        l as usize
    }
}

impl Layer for InfogainLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "InfogainLoss"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![1]]
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        let n = if self.matrix.is_some() { 2 } else { 3 };
        Reads { bottoms: vec![true; n], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (x, labels, h) = (f.bottoms[0], f.bottoms[1], self.h(f.bottoms));
        let k = self.classes;
        let mut p = vec![0.0f32; k];
        let mut loss = 0.0f64;
        for i in 0..self.outer {
            for j in 0..self.inner {
                self.softmax(x, i, j, &mut p);
                let row = &h[self.label(labels, i, j) * k..][..k];
                loss -= row.iter().zip(&p).map(|(h, p)| f64::from(h * p.max(f32::MIN_POSITIVE).ln())).sum::<f64>();
            }
        }
        f.tops[0][0] = (loss / f64::from(self.divisor)) as f32;
    }

    fn backward(&self, b: Backward<'_, '_>) {
        for d in b.bottom_diffs.iter_mut().skip(1) {
            d.fill(0.0);
        }
        let Some(d) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (x, labels, h) = (b.bottoms[0], b.bottoms[1], self.h(b.bottoms));
        let k = self.classes;
        let scale = b.loss_weight / self.divisor;
        let mut p = vec![0.0f32; k];
        for i in 0..self.outer {
            for j in 0..self.inner {
                self.softmax(x, i, j, &mut p);
                let row = &h[self.label(labels, i, j) * k..][..k];
                let row_sum: f32 = row.iter().sum();
                for (c, (pc, hc)) in p.iter().zip(row).enumerate() {
                    d[(i * k + c) * self.inner + j] = scale * (pc * row_sum - hc);
                }
            }
        }
    }
}

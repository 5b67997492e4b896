//! Caffe's `SigmoidCrossEntropyLoss`: the cross-entropy of `σ(x)` against
//! targets `t` in [0, 1] (second bottom, same count), computed stably as
//! Caffe does, divided as `loss_param` says (the batch by default); the
//! gradient `(σ(x) − t)` times the loss weight over the same divisor goes
//! to `x` only. It has GPU code (`gpu`). It owns this formula only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::layer_spec::LossNorm;

pub struct SigmoidCrossEntropyLoss {
    len: usize,
    /// The first axis: items (at least 1).
    items: usize,
    divisor: f32,
}

impl SigmoidCrossEntropyLoss {
    pub fn new(norm: LossNorm, bottoms: &[Shape]) -> Result<SigmoidCrossEntropyLoss, String> {
        let [x, t] = bottoms else { return Err(format!("takes 2 bottom blobs, has {}", bottoms.len())) };
        if count(x) != count(t) || x.is_empty() {
            return Err(format!("scores {x:?} and targets {t:?} must hold the same number of values"));
        }
        let divisor = match norm {
            LossNorm::Batch => x[0],
            LossNorm::Count => count(x),
            LossNorm::None => 1,
        };
        Ok(SigmoidCrossEntropyLoss { len: count(x), items: x[0].max(1), divisor: divisor.max(1) as f32 })
    }
}

impl Layer for SigmoidCrossEntropyLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "SigmoidCrossEntropyLoss"
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
        let (x, t) = (&f.bottoms[0][..self.len], &f.bottoms[1][..self.len]);
        // −[t log σ(x) + (1 − t) log(1 − σ(x))], without overflow for large |x|.
        let loss: f64 = x
            .iter()
            .zip(t)
            .map(|(&x, &t)| {
                let pos = f64::from(u8::from(x >= 0.0));
                let x = f64::from(x);
                -(x * (f64::from(t) - pos) - (1.0 + (x - 2.0 * x * pos).exp()).ln())
            })
            .sum();
        f.tops[0][0] = (loss / f64::from(self.divisor)) as f32;
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(d) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let scale = b.loss_weight / self.divisor;
        let (x, t) = (&b.bottoms[0][..self.len], &b.bottoms[1][..self.len]);
        for ((d, x), t) in d[..self.len].iter_mut().zip(x).zip(t) {
            *d = scale * (1.0 / (1.0 + (-x).exp()) - t);
        }
    }
}

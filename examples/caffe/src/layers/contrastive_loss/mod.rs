//! Caffe's `ContrastiveLoss` (Hadsell et al. 2006, the siamese nets'):
//! bottoms a and b (N items of one count each) and y (one per item,
//! non-zero for a similar pair). With d = ‖a − b‖ the loss is
//! Σ [y ? d² : max(margin − d, 0)²] / 2N (`legacy_version`:
//! max(margin − d², 0)). Gradients go to a and b only, as Caffe's (its
//! 1e-4 guard against d = 0 included). It owns this formula only; it has
//! GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::standard_conf::ContrastiveConf;

pub struct ContrastiveLoss {
    conf: ContrastiveConf,
    num: usize,
    /// Values per item of a and b.
    dim: usize,
}

impl ContrastiveLoss {
    pub fn new(conf: ContrastiveConf, bottoms: &[Shape]) -> Result<ContrastiveLoss, String> {
        let [a, b, y] = bottoms else {
            return Err(format!("takes 3 bottom blobs (a, b, similar), has {}", bottoms.len()));
        };
        if a.is_empty() || a != b {
            return Err(format!("the pair's bottoms {a:?} and {b:?} must have one shape"));
        }
        let num = a[0];
        if count(y) != num {
            return Err(format!("the similarity bottom {y:?} must hold one value per item ({num})"));
        }
        Ok(ContrastiveLoss { conf, num, dim: count(a) / num.max(1) })
    }

    /// Item i's squared distance.
    fn dist_sq(&self, a: &[f32], b: &[f32], i: usize) -> f32 {
        let r = i * self.dim..(i + 1) * self.dim;
        a[r.clone()].iter().zip(&b[r]).map(|(x, y)| (x - y) * (x - y)).sum()
    }
}

/// One item's squared distance and whether its pair is similar.
struct PairLoss {
    dist_sq: f32,
    similar: bool,
}

impl ContrastiveLoss {
    /// The loss of the items' pairs, summed in f64 in item order.
    fn loss(&self, items: impl Iterator<Item = PairLoss>) -> f32 {
        let margin = f64::from(self.conf.margin);
        let loss: f64 = items
            .map(|p| {
                let d2 = f64::from(p.dist_sq);
                if p.similar {
                    d2
                } else if self.conf.legacy_version {
                    (margin - d2).max(0.0)
                } else {
                    (margin - d2.sqrt()).max(0.0).powi(2)
                }
            })
            .sum();
        (loss / self.num.max(1) as f64 / 2.0) as f32
    }
}

/// Caffe reads the similarity as an integer: non-zero is similar.
fn similar(y: f32) -> bool {
    y as i32 != 0
}

impl Layer for ContrastiveLoss {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "ContrastiveLoss"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![1]]
    }

    fn is_loss(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true, true, true], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (a, b, y) = (f.bottoms[0], f.bottoms[1], f.bottoms[2]);
        let items = (0..self.num).map(|i| PairLoss { dist_sq: self.dist_sq(a, b, i), similar: similar(y[i]) });
        f.tops[0][0] = self.loss(items);
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let (x0, x1, y) = (b.bottoms[0], b.bottoms[1], b.bottoms[2]);
        let margin = self.conf.margin;
        for (k, sign) in [(0, 1.0f32), (1, -1.0)] {
            let Some(d) = b.bottom_diffs.get_mut(k).filter(|d| !d.is_empty()) else { continue };
            let alpha = sign * b.loss_weight / self.num.max(1) as f32;
            for (i, &yi) in y[..self.num].iter().enumerate() {
                let r = i * self.dim..(i + 1) * self.dim;
                let scale = if similar(yi) {
                    alpha
                } else {
                    let d2 = self.dist_sq(x0, x1, i);
                    let (mdist, beta) = if self.conf.legacy_version {
                        (margin - d2, -alpha)
                    } else {
                        let dist = d2.sqrt();
                        (margin - dist, -alpha * (margin - dist) / (dist + 1e-4))
                    };
                    if mdist > 0.0 {
                        beta
                    } else {
                        0.0
                    }
                };
                for ((o, p), q) in d[r.clone()].iter_mut().zip(&x0[r.clone()]).zip(&x1[r]) {
                    *o = scale * (p - q);
                }
            }
        }
        if let Some(d) = b.bottom_diffs.get_mut(2) {
            d.fill(0.0);
        }
    }
}

//! Caffe's `MVN`: per item and channel (or per item, across channels) the
//! mean is removed and, with `normalize_variance`, the result divided by
//! σ + eps. Its mean and σ + eps are kept for backward, which is Caffe's:
//! `(dy − mean(dy) − y · mean(dy · y)) / (σ + eps)` (without the variance:
//! `dy − mean(dy)`). It owns this math only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::standard_conf::MvnConf;

#[derive(Debug)]
pub struct Mvn {
    conf: MvnConf,
    shape: Shape,
    /// Rows normalised on their own, and the values in each.
    rows: usize,
    dim: usize,
}

impl Mvn {
    pub fn new(conf: MvnConf, bottom: &Shape) -> Result<Mvn, String> {
        if bottom.len() < 2 {
            return Err(format!("needs a bottom with at least 2 axes (num, channels, ...), got {bottom:?}"));
        }
        let rows = if conf.across_channels { bottom[0] } else { bottom[0] * bottom[1] };
        let dim = count(bottom) / rows.max(1);
        Ok(Mvn { conf, shape: bottom.clone(), rows, dim })
    }
}

impl Layer for Mvn {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "MVN"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    /// Per row: the mean, then σ + eps.
    fn aux_len(&self) -> usize {
        2 * self.rows
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![self.conf.normalize_variance], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let d = self.dim;
        let n = d as f32;
        let (means, sigmas) = f.aux.split_at_mut(self.rows);
        for (r, (x, y)) in f.bottoms[0].chunks_exact(d).zip(f.tops[0].chunks_exact_mut(d)).take(self.rows).enumerate() {
            let mean = x.iter().sum::<f32>() / n;
            y.iter_mut().zip(x).for_each(|(y, x)| *y = x - mean);
            means[r] = mean;
            if self.conf.normalize_variance {
                let s = (y.iter().map(|v| v * v).sum::<f32>() / n).sqrt() + self.conf.eps;
                y.iter_mut().for_each(|v| *v /= s);
                sigmas[r] = s;
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let d = self.dim;
        let n = d as f32;
        let dy = b.top_diffs[0];
        if dy.is_empty() {
            dx.fill(0.0);
            return;
        }
        let (means, sigmas) = b.aux.split_at(self.rows);
        for r in 0..self.rows {
            let (g, dxr) = (&dy[r * d..(r + 1) * d], &mut dx[r * d..(r + 1) * d]);
            let mean_g = g.iter().sum::<f32>() / n;
            if !self.conf.normalize_variance {
                dxr.iter_mut().zip(g).for_each(|(o, g)| *o = g - mean_g);
                continue;
            }
            let (mean, s) = (means[r], sigmas[r]);
            let x = &b.bottoms[0][r * d..(r + 1) * d];
            let mean_gy = g.iter().zip(x).map(|(g, x)| g * (x - mean) / s).sum::<f32>() / n;
            for ((o, g), x) in dxr.iter_mut().zip(g).zip(x) {
                let y = (x - mean) / s;
                *o = (g - mean_g - y * mean_gy) / s;
            }
        }
    }
}

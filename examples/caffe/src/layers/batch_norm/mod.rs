//! Batch normalisation (Caffe's `BatchNorm`, no learned scale: a `Scale`
//! layer follows it): per channel, `y = (x − mean) / sqrt(var + eps)`.
//! With batch statistics (TRAIN by default) it also keeps Caffe's three
//! blobs, running sums of the mean and the unbiased variance and their
//! scale factor, as `blob ← fraction · blob + batch value`; with
//! `use_global_stats` (TEST by default) it normalises by `blob / factor`.
//! Those blobs are statistics, not weights: backward writes the change to
//! them (see [`Layer::param_grad_is_update`]), and solvers leave them alone.
//! It runs in place. It owns this math only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::layer_conf::Filler;
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::BatchNormConf;

#[derive(Debug)]
pub struct BatchNorm {
    conf: BatchNormConf,
    shape: Shape,
    num: usize,
    channels: usize,
    spatial: usize,
}

impl BatchNorm {
    pub fn new(conf: BatchNormConf, bottom: &Shape) -> Result<BatchNorm, String> {
        if bottom.len() < 2 || bottom[0] == 0 {
            return Err(format!("needs a bottom of (num, channels, ...), got {bottom:?}"));
        }
        if conf.eps <= 0.0 {
            return Err(format!("eps {} must be positive", conf.eps));
        }
        Ok(BatchNorm {
            conf,
            shape: bottom.clone(),
            num: bottom[0],
            channels: bottom[1],
            spatial: bottom[2..].iter().product(),
        })
    }

    /// Values per channel in one batch.
    fn per_channel(&self) -> usize {
        self.num * self.spatial
    }

    /// Calls `f(channel, run)` for each contiguous run of one channel's values.
    fn runs(&self, n: usize, mut f: impl FnMut(usize, std::ops::Range<usize>)) {
        for i in 0..self.num {
            for c in 0..self.channels {
                let s = (i * self.channels + c) * self.spatial;
                f(c, s..(s + self.spatial).min(n));
            }
        }
    }
}

impl Layer for BatchNorm {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "BatchNorm"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let c = self.channels;
        [vec![c], vec![c], vec![1]]
            .into_iter()
            .map(|shape| ParamBlob { shape, filler: Filler::Constant(0.0) })
            .collect()
    }

    fn param_grad_is_update(&self) -> bool {
        true
    }

    /// Batch mean, batch variance and 1 / sqrt(var + eps), per channel.
    fn aux_len(&self) -> usize {
        3 * self.channels
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: true, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let c = self.channels;
        let n = count(&self.shape);
        let y = &mut f.tops[0][..n];
        let (mean, rest) = f.aux[..3 * c].split_at_mut(c);
        let (var, inv_std) = rest.split_at_mut(c);
        if self.conf.use_global_stats {
            let factor = if f.params[2 * c] == 0.0 { 0.0 } else { 1.0 / f.params[2 * c] };
            mean.iter_mut().zip(&f.params[..c]).for_each(|(m, p)| *m = p * factor);
            var.iter_mut().zip(&f.params[c..2 * c]).for_each(|(v, p)| *v = p * factor);
        } else {
            let m = self.per_channel() as f64;
            let mut sums = vec![0.0f64; c];
            self.runs(n, |ch, r| sums[ch] += y[r].iter().map(|v| f64::from(*v)).sum::<f64>());
            mean.iter_mut().zip(&sums).for_each(|(mu, s)| *mu = (s / m) as f32);
            let mut sq = vec![0.0f64; c];
            self.runs(n, |ch, r| sq[ch] += y[r].iter().map(|v| f64::from(v - mean[ch]).powi(2)).sum::<f64>());
            var.iter_mut().zip(&sq).for_each(|(v, s)| *v = (s / m) as f32);
        }
        inv_std.iter_mut().zip(var.iter()).for_each(|(s, v)| *s = 1.0 / (v + self.conf.eps).sqrt());
        self.runs(n, |ch, r| y[r].iter_mut().for_each(|v| *v = (*v - mean[ch]) * inv_std[ch]));
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let c = self.channels;
        let n = count(&self.shape);
        let (mean, var, inv_std) = (&b.aux[..c], &b.aux[c..2 * c], &b.aux[2 * c..3 * c]);
        // The running statistics' change, as Caffe's forward makes it.
        let grad = &mut b.param_grad[..2 * c + 1];
        if self.conf.use_global_stats {
            grad.fill(0.0);
        } else {
            let keep = self.conf.moving_average_fraction - 1.0;
            let m = self.per_channel() as f32;
            let unbias = if m > 1.0 { m / (m - 1.0) } else { 1.0 };
            for ch in 0..c {
                grad[ch] = keep * b.params[ch] + mean[ch];
                grad[c + ch] = keep * b.params[c + ch] + unbias * var[ch];
            }
            grad[2 * c] = keep * b.params[2 * c] + 1.0;
        }
        let Some(d) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let d = &mut d[..n];
        if self.conf.use_global_stats {
            self.runs(n, |ch, r| d[r].iter_mut().for_each(|g| *g *= inv_std[ch]));
            return;
        }
        // dx = (dy − mean(dy) − mean(dy·y)·y) / sqrt(var + eps)
        let y = &b.tops[0][..n];
        let m = self.per_channel() as f64;
        let (mut sum_dy, mut sum_dyy) = (vec![0.0f64; c], vec![0.0f64; c]);
        self.runs(n, |ch, r| {
            for (g, t) in d[r.clone()].iter().zip(&y[r]) {
                sum_dy[ch] += f64::from(*g);
                sum_dyy[ch] += f64::from(g * t);
            }
        });
        self.runs(n, |ch, r| {
            let (a, k) = ((sum_dy[ch] / m) as f32, (sum_dyy[ch] / m) as f32);
            for (g, t) in d[r.clone()].iter_mut().zip(&y[r]) {
                *g = (*g - a - k * t) * inv_std[ch];
            }
        });
    }
}

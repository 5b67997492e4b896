//! Local response normalisation (Caffe's `LRN`): across channels,
//! `y = x · (k + α/n · Σ x²)^−β` over `n` neighbouring channels, or within a
//! channel, `y = x · (1 + α/n² · Σ x²)^−β` over an n×n window zero-padded at
//! the borders (Caffe builds that one from average pooling, whose divisor is
//! always n² here). The scale is its backward state. It owns this math only.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::{LrnConf, NormRegion};

#[derive(Debug)]
pub struct Lrn {
    conf: LrnConf,
    shape: [usize; 4],
}

impl Lrn {
    pub fn new(conf: LrnConf, bottom: &Shape) -> Result<Lrn, String> {
        let [n, c, h, w] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        if conf.local_size == 0 || conf.local_size % 2 == 0 {
            return Err(format!("local_size {} must be odd (Caffe's LRN centres the window)", conf.local_size));
        }
        Ok(Lrn { conf, shape: [n, c, h, w] })
    }

    /// The constant term and the factor on the windowed sum of squares.
    fn coefficients(&self) -> (f32, f32) {
        let n = self.conf.local_size as f32;
        match self.conf.region {
            NormRegion::AcrossChannels => (self.conf.k, self.conf.alpha / n),
            NormRegion::WithinChannel => (1.0, self.conf.alpha / (n * n)),
        }
    }

    /// `out[i] = Σ_{j in window(i)} v[j]` over one image (C×H×W). Windows
    /// are symmetric, so the same sum serves forward and backward.
    fn window_sum(&self, v: &[f32], out: &mut [f32]) {
        let [_, c, h, w] = self.shape;
        let half = self.conf.local_size / 2;
        let plane = h * w;
        match self.conf.region {
            NormRegion::AcrossChannels => {
                for ch in 0..c {
                    let (lo, hi) = (ch.saturating_sub(half), (ch + half).min(c - 1));
                    let o = &mut out[ch * plane..(ch + 1) * plane];
                    o.fill(0.0);
                    for j in lo..=hi {
                        o.iter_mut().zip(&v[j * plane..(j + 1) * plane]).for_each(|(a, b)| *a += b);
                    }
                }
            }
            NormRegion::WithinChannel => {
                for ch in 0..c {
                    let vp = &v[ch * plane..(ch + 1) * plane];
                    let op = &mut out[ch * plane..(ch + 1) * plane];
                    for y in 0..h {
                        let (ylo, yhi) = (y.saturating_sub(half), (y + half).min(h - 1));
                        for x in 0..w {
                            let (xlo, xhi) = (x.saturating_sub(half), (x + half).min(w - 1));
                            let mut s = 0.0;
                            for yy in ylo..=yhi {
                                s += vp[yy * w + xlo..=yy * w + xhi].iter().sum::<f32>();
                            }
                            op[y * w + x] = s;
                        }
                    }
                }
            }
        }
    }

    fn image(&self) -> usize {
        self.shape[1] * self.shape[2] * self.shape[3]
    }
}

impl Layer for Lrn {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "LRN"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.to_vec()]
    }

    fn aux_len(&self) -> usize {
        count(&self.shape)
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: true, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let img = self.image();
        let n = count(&self.shape);
        let (c0, a) = self.coefficients();
        let beta = self.conf.beta;
        let x = &f.bottoms[0][..n];
        // One scratch image per thread, not per image.
        f.tops[0][..n].par_chunks_mut(img).zip(f.aux[..n].par_chunks_mut(img)).zip(x.par_chunks(img)).for_each_init(
            || vec![0.0f32; img],
            |sq, ((y, scale), x)| {
                sq.iter_mut().zip(x).for_each(|(s, v)| *s = v * v);
                self.window_sum(sq, scale);
                for ((yi, si), xi) in y.iter_mut().zip(scale.iter_mut()).zip(x) {
                    *si = c0 + a * *si;
                    *yi = xi * si.powf(-beta);
                }
            },
        );
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let img = self.image();
        let n = count(&self.shape);
        let (_, a) = self.coefficients();
        let beta = self.conf.beta;
        let (x, y, dy, scale) = (&b.bottoms[0][..n], &b.tops[0][..n], &b.top_diffs[0][..n], &b.aux[..n]);
        // dx_i = dy_i·s_i^−β − 2aβ·x_i·Σ_{j: i in window(j)} dy_j·y_j / s_j.
        dx[..n].par_chunks_mut(img).enumerate().for_each_init(
            || vec![0.0f32; img],
            |ratio, (i, dx)| {
                let r = i * img..(i + 1) * img;
                for (((q, g), t), s) in ratio.iter_mut().zip(&dy[r.clone()]).zip(&y[r.clone()]).zip(&scale[r.clone()]) {
                    *q = g * t / s;
                }
                self.window_sum(ratio, dx);
                for (((d, xi), g), s) in dx.iter_mut().zip(&x[r.clone()]).zip(&dy[r.clone()]).zip(&scale[r]) {
                    *d = g * s.powf(-beta) - 2.0 * a * beta * xi * *d;
                }
            },
        );
    }
}

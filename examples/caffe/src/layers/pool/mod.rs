//! Max and average pooling with Caffe's output-size rule (rounding up, or
//! down for `round_mode: FLOOR`; the last window starting inside the padded
//! image) and Caffe's average divisor
//! (the window clipped to the padded image). Planes run in parallel. It owns
//! the pooling math; the max mask is its backward state.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{Backward, Forward, Layer, Reads, Shape};
use crate::proto::net::{PoolConf, PoolMethod, PoolRound};

pub struct Pool {
    method: PoolMethod,
    num: usize,
    channels: usize,
    height: usize,
    width: usize,
    out_h: usize,
    out_w: usize,
    kernel: (usize, usize),
    stride: (usize, usize),
    pad: (usize, usize),
    /// Per output row / column: the clipped window [start, end) and its
    /// length within the padded image (for Caffe's average divisor).
    rows: Vec<(usize, usize, f32)>,
    cols: Vec<(usize, usize, f32)>,
}

/// The windows along one axis.
fn windows(input: usize, out: usize, k: usize, stride: usize, pad: usize) -> Vec<(usize, usize, f32)> {
    (0..out)
        .map(|o| {
            let start = (o * stride) as isize - pad as isize;
            let end_pad = (start + k as isize).min((input + pad) as isize);
            let end = (start + k as isize).min(input as isize);
            (start.max(0) as usize, end.max(0) as usize, (end_pad - start) as f32)
        })
        .collect()
}

/// Caffe's pooled size: (in + 2·pad − k) / stride rounded as `round` says
/// (up by default), + 1, minus one if the last window would start in the
/// padding.
fn pooled(input: usize, k: usize, stride: usize, pad: usize, round: PoolRound) -> usize {
    let span = input + 2 * pad - k;
    let mut out = match round {
        PoolRound::Ceil => span.div_ceil(stride),
        PoolRound::Floor => span / stride,
    } + 1;
    if pad > 0 && (out - 1) * stride >= input + pad {
        out -= 1;
    }
    out
}

impl Pool {
    pub fn new(conf: &PoolConf, bottom: &Shape) -> Result<Pool, String> {
        let [num, channels, height, width] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        let (kernel, stride, pad) =
            if conf.global { ((height, width), (1, 1), (0, 0)) } else { (conf.kernel, conf.stride, conf.pad) };
        if height + 2 * pad.0 < kernel.0 || width + 2 * pad.1 < kernel.1 {
            return Err(format!("kernel {}x{} is larger than the padded {height}x{width} input", kernel.0, kernel.1));
        }
        let out_h = pooled(height, kernel.0, stride.0, pad.0, conf.round);
        let out_w = pooled(width, kernel.1, stride.1, pad.1, conf.round);
        let rows = windows(height, out_h, kernel.0, stride.0, pad.0);
        let cols = windows(width, out_w, kernel.1, stride.1, pad.1);
        // Rounding up can leave a last window past the image; Caffe would pool nothing there.
        if rows.iter().chain(&cols).any(|(s, e, _)| e <= s) {
            return Err(format!(
                "kernel {}x{} with stride {}x{} leaves an output window outside the {height}x{width} input; \
                 use a larger kernel or a smaller stride",
                kernel.0, kernel.1, stride.0, stride.1
            ));
        }
        Ok(Pool { method: conf.method, num, channels, height, width, out_h, out_w, kernel, stride, pad, rows, cols })
    }

    /// The window of output (ph, pw): clipped bounds and Caffe's divisor.
    fn window(&self, ph: usize, pw: usize) -> (usize, usize, usize, usize, f32) {
        let (hs, he, hn) = self.rows[ph];
        let (ws, we, wn) = self.cols[pw];
        (hs, he, ws, we, hn * wn)
    }

    fn planes(&self) -> usize {
        self.num * self.channels
    }
}

impl Layer for Pool {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Pooling"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![self.num, self.channels, self.out_h, self.out_w]]
    }

    fn aux_len(&self) -> usize {
        match self.method {
            PoolMethod::Max => self.planes() * self.out_h * self.out_w,
            PoolMethod::Ave => 0,
        }
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (hw, ohw) = (self.height * self.width, self.out_h * self.out_w);
        let x = f.bottoms[0];
        let y = &mut f.tops[0][..self.planes() * ohw];
        match self.method {
            PoolMethod::Max => {
                let mask = &mut f.aux[..self.planes() * ohw];
                y.par_chunks_mut(ohw).zip(mask.par_chunks_mut(ohw)).enumerate().for_each(|(pl, (yp, mp))| {
                    let xp = &x[pl * hw..(pl + 1) * hw];
                    for ph in 0..self.out_h {
                        for pw in 0..self.out_w {
                            let (hs, he, ws, we, _) = self.window(ph, pw);
                            let (mut best, mut at) = (f32::NEG_INFINITY, hs * self.width + ws);
                            for h in hs..he {
                                for w in ws..we {
                                    let v = xp[h * self.width + w];
                                    if v > best {
                                        best = v;
                                        at = h * self.width + w;
                                    }
                                }
                            }
                            yp[ph * self.out_w + pw] = best;
                            // Plane offsets stay below 2^24, so f32 holds them exactly.
                            mp[ph * self.out_w + pw] = at as f32;
                        }
                    }
                });
            }
            PoolMethod::Ave => {
                y.par_chunks_mut(ohw).enumerate().for_each(|(pl, yp)| {
                    let xp = &x[pl * hw..(pl + 1) * hw];
                    for ph in 0..self.out_h {
                        for pw in 0..self.out_w {
                            let (hs, he, ws, we, size) = self.window(ph, pw);
                            let mut sum = 0.0;
                            for h in hs..he {
                                sum += xp[h * self.width + ws..h * self.width + we].iter().sum::<f32>();
                            }
                            yp[ph * self.out_w + pw] = sum / size;
                        }
                    }
                });
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (hw, ohw) = (self.height * self.width, self.out_h * self.out_w);
        let dy = b.top_diffs[0];
        let dx = &mut dx[..self.planes() * hw];
        dx.par_chunks_mut(hw).enumerate().for_each(|(pl, dxp)| {
            dxp.fill(0.0);
            let dyp = &dy[pl * ohw..(pl + 1) * ohw];
            match self.method {
                PoolMethod::Max => {
                    let mp = &b.aux[pl * ohw..(pl + 1) * ohw];
                    for (g, m) in dyp.iter().zip(mp) {
                        dxp[*m as usize] += g;
                    }
                }
                PoolMethod::Ave => {
                    for ph in 0..self.out_h {
                        for pw in 0..self.out_w {
                            let (hs, he, ws, we, size) = self.window(ph, pw);
                            let g = dyp[ph * self.out_w + pw] / size;
                            for h in hs..he {
                                dxp[h * self.width + ws..h * self.width + we].iter_mut().for_each(|v| *v += g);
                            }
                        }
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::pooled;
    use crate::proto::net::{PoolConf, PoolMethod, PoolRound};

    #[test]
    fn caffe_output_sizes() {
        let ceil = PoolRound::Ceil;
        assert_eq!(pooled(24, 2, 2, 0, ceil), 12);
        assert_eq!(pooled(8, 2, 2, 0, ceil), 4);
        // Caffe rounds up: a 3x3/2 window over 6 gives 3 outputs (last window clipped).
        assert_eq!(pooled(6, 3, 2, 0, ceil), 3);
        assert_eq!(pooled(5, 3, 2, 1, ceil), 3);
        // DenseNet's pool1 (3x3/2, pad 1) over 112: 57 rounding up, 56 with FLOOR.
        assert_eq!(pooled(112, 3, 2, 1, ceil), 57);
        assert_eq!(pooled(112, 3, 2, 1, PoolRound::Floor), 56);
        assert_eq!(pooled(6, 3, 2, 0, PoolRound::Floor), 2);
        assert_eq!(pooled(24, 2, 2, 0, PoolRound::Floor), 12);
    }

    #[test]
    fn windows_outside_the_input_are_refused() {
        let conf = PoolConf {
            method: PoolMethod::Max,
            kernel: (1, 1),
            stride: (3, 3),
            pad: (0, 0),
            global: false,
            round: PoolRound::Ceil,
        };
        assert!(super::Pool::new(&conf, &vec![1, 1, 5, 5]).is_err());
        // Rounding down drops the window that would start past the input.
        let floor = PoolConf { round: PoolRound::Floor, ..conf.clone() };
        assert!(super::Pool::new(&floor, &vec![1, 1, 5, 5]).is_ok());
        let ok = PoolConf { kernel: (2, 2), stride: (3, 3), ..conf };
        assert!(super::Pool::new(&ok, &vec![1, 1, 5, 5]).is_ok());
    }
}

//! Convolution (Caffe's `Convolution` layer, group 1): im2col + GEMM per
//! image, images spread over rayon's threads, weight gradients summed per
//! thread then reduced. It owns the conv math; it must never allocate per
//! image (scratch is per thread).

use rayon::prelude::*;

use crate::blas::gemm;
use crate::layers::im2col::{col2im, im2col, Geometry};
use crate::layers::{Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::net::ConvConf;

pub struct Conv {
    conf: ConvConf,
    num: usize,
    g: Geometry,
}

impl Conv {
    pub fn new(conf: &ConvConf, bottom: &Shape) -> Result<Conv, String> {
        let [num, channels, height, width] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        let (kh, kw) = conf.kernel;
        if height + 2 * conf.pad.0 < kh || width + 2 * conf.pad.1 < kw {
            return Err(format!("kernel {kh}x{kw} is larger than the padded {height}x{width} input"));
        }
        let out_h = (height + 2 * conf.pad.0 - kh) / conf.stride.0 + 1;
        let out_w = (width + 2 * conf.pad.1 - kw) / conf.stride.1 + 1;
        let g = Geometry { channels, height, width, kernel: conf.kernel, stride: conf.stride, pad: conf.pad, out_h, out_w };
        Ok(Conv { conf: conf.clone(), num, g })
    }

    fn weights_len(&self) -> usize {
        self.conf.num_output * self.g.col_rows()
    }
}

impl Layer for Conv {
    fn type_name(&self) -> &'static str {
        "Convolution"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![self.num, self.conf.num_output, self.g.out_h, self.g.out_w]]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let (kh, kw) = self.conf.kernel;
        let mut p = vec![ParamBlob {
            shape: vec![self.conf.num_output, self.g.channels, kh, kw],
            filler: self.conf.weight_filler.clone(),
        }];
        if self.conf.bias_term {
            p.push(ParamBlob { shape: vec![self.conf.num_output], filler: self.conf.bias_filler.clone() });
        }
        p
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let g = self.g;
        let (o, k, p) = (self.conf.num_output, g.col_rows(), g.col_cols());
        let (w, bias) = f.params.split_at(self.weights_len());
        let image = g.channels * g.height * g.width;
        let x = f.bottoms[0];
        f.tops[0][..self.num * o * p].par_chunks_mut(o * p).enumerate().for_each_init(
            || vec![0.0f32; if g.is_identity() { 0 } else { k * p }],
            |col, (i, y)| {
                let xi = &x[i * image..(i + 1) * image];
                let cols: &[f32] = if g.is_identity() {
                    xi
                } else {
                    im2col(&g, xi, col);
                    col
                };
                gemm(false, false, o, p, k, 1.0, w, cols, 0.0, y);
                if self.conf.bias_term {
                    for (row, b) in y.chunks_exact_mut(p).zip(bias) {
                        row.iter_mut().for_each(|v| *v += b);
                    }
                }
            },
        );
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let g = self.g;
        let (o, k, p) = (self.conf.num_output, g.col_rows(), g.col_cols());
        let wl = self.weights_len();
        let w = &b.params[..wl];
        let image = g.channels * g.height * g.width;
        let (x, dy) = (b.bottoms[0], b.top_diffs[0]);
        let bias = self.conf.bias_term;
        // One entry per image: where its bottom gradient goes, if anywhere.
        let dx: Vec<Option<&mut [f32]>> = match b.bottom_diffs.first_mut() {
            Some(d) if !d.is_empty() => d[..self.num * image].chunks_mut(image).map(Some).collect(),
            _ => (0..self.num).map(|_| None).collect(),
        };
        let per_task = self.num.div_ceil(rayon::current_num_threads().max(1)).max(1);
        let grad = dx
            .into_par_iter()
            .enumerate()
            .with_min_len(per_task)
            .fold(
                || (vec![0.0f32; wl + if bias { o } else { 0 }], vec![0.0f32; k * p]),
                |(mut acc, mut col), (i, dxi)| {
                    let xi = &x[i * image..(i + 1) * image];
                    let dyi = &dy[i * o * p..(i + 1) * o * p];
                    let cols: &[f32] = if g.is_identity() {
                        xi
                    } else {
                        im2col(&g, xi, &mut col);
                        &col
                    };
                    // dW += dy_i · col_iᵀ
                    gemm(false, true, o, k, p, 1.0, dyi, cols, 1.0, &mut acc[..wl]);
                    if bias {
                        for (db, row) in acc[wl..].iter_mut().zip(dyi.chunks_exact(p)) {
                            *db += row.iter().sum::<f32>();
                        }
                    }
                    if let Some(dxi) = dxi {
                        // dx_i = col2im(Wᵀ · dy_i)
                        if g.is_identity() {
                            gemm(true, false, k, p, o, 1.0, w, dyi, 0.0, dxi);
                        } else {
                            gemm(true, false, k, p, o, 1.0, w, dyi, 0.0, &mut col);
                            dxi.fill(0.0);
                            col2im(&g, &col, dxi);
                        }
                    }
                    (acc, col)
                },
            )
            .map(|(acc, _)| acc)
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
                a
            });
        match grad {
            Some(gr) => b.param_grad[..gr.len()].copy_from_slice(&gr),
            None => b.param_grad.fill(0.0),
        }
    }
}

//! Caffe's `Deconvolution` (the transpose of a convolution, FCNs'
//! upsampling): each image's column matrix is Wᵀ·x per channel group,
//! summed back into the larger top by col2im, plus an optional bias. The
//! weights are shaped as Caffe's, (input channels, num_output / group, kh,
//! kw), so Caffe's weight files load unchanged. Backward is a convolution
//! of the top gradient: im2col, then W·col for the bottom gradient and
//! x·colᵀ for the weights. Images run in parallel, weight gradients summed
//! in image order (the same bits every run). It owns this math only; its
//! GPU code (`gpu`) is Convolution's with the roles swapped.

mod gpu;

use rayon::prelude::*;

use crate::layers::im2col::{col2im, im2col, Geometry};
use crate::layers::layer::{Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::layer_conf::ConvSpec;
use crate::util::blas::gemm;

#[derive(Debug)]
pub struct Deconv {
    conf: ConvSpec,
    num: usize,
    /// The bottom's channels.
    channels: usize,
    /// The convolution this layer transposes: its image is the top, its
    /// output the bottom.
    g: Geometry,
}

impl Deconv {
    pub fn new(conf: &ConvSpec, bottom: &Shape) -> Result<Deconv, String> {
        let [num, channels, height, width] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        let (kh, kw) = conf.kernel;
        let (dh, dw) = conf.dilation;
        let (sh, sw) = conf.stride;
        if kh == 0 || kw == 0 || dh == 0 || dw == 0 || sh == 0 || sw == 0 {
            return Err("kernel size, stride and dilation must be at least 1".into());
        }
        let group = conf.group;
        if group == 0 || channels % group != 0 || conf.num_output % group != 0 {
            return Err(format!(
                "group {group} must divide both the {channels} input channels and num_output {}",
                conf.num_output
            ));
        }
        // Caffe's output size: stride · (in − 1) + dilated kernel − 2 · pad.
        let (eh, ew) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        let (full_h, full_w) = (sh * height.saturating_sub(1) + eh, sw * width.saturating_sub(1) + ew);
        if height == 0 || width == 0 || full_h <= 2 * conf.pad.0 || full_w <= 2 * conf.pad.1 {
            return Err(format!(
                "pad {}x{} leaves no output of the {height}x{width} input upsampled to {full_h}x{full_w}",
                conf.pad.0, conf.pad.1
            ));
        }
        let g = Geometry {
            channels: conf.num_output,
            height: full_h - 2 * conf.pad.0,
            width: full_w - 2 * conf.pad.1,
            kernel: conf.kernel,
            stride: conf.stride,
            pad: conf.pad,
            dilation: conf.dilation,
            out_h: height,
            out_w: width,
        };
        Ok(Deconv { conf: conf.clone(), num, channels, g })
    }

    /// (input channels, column rows) of one channel group.
    fn per_group(&self) -> (usize, usize) {
        (self.channels / self.conf.group, self.g.col_rows() / self.conf.group)
    }

    fn weights_len(&self) -> usize {
        self.channels * self.per_group().1
    }

    fn top_len(&self) -> usize {
        self.conf.num_output * self.g.height * self.g.width
    }
}

/// Images per task of backward: a fixed number, so the order in which
/// weight gradients are summed never depends on the thread count.
const IMAGES_PER_TASK: usize = 4;

impl Layer for Deconv {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Deconvolution"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![self.num, self.conf.num_output, self.g.height, self.g.width]]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let (kh, kw) = self.conf.kernel;
        let mut p = vec![ParamBlob {
            shape: vec![self.channels, self.conf.num_output / self.conf.group, kh, kw],
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
        let (k, p) = (g.col_rows(), g.col_cols());
        let (cg, kg) = self.per_group();
        let (w, bias) = f.params.split_at(self.weights_len());
        let image = self.channels * p;
        let plane = g.height * g.width;
        let x = f.bottoms[0];
        f.tops[0][..self.num * self.top_len()].par_chunks_mut(self.top_len()).enumerate().for_each_init(
            || vec![0.0f32; k * p],
            |col, (i, y)| {
                let xi = &x[i * image..(i + 1) * image];
                // col_g (kg × p) = W_gᵀ · x_g.
                for gr in 0..self.conf.group {
                    let (wg, xg) = (&w[gr * cg * kg..(gr + 1) * cg * kg], &xi[gr * cg * p..(gr + 1) * cg * p]);
                    gemm(true, false, kg, p, cg, 1.0, wg, xg, 0.0, &mut col[gr * kg * p..(gr + 1) * kg * p]);
                }
                y.fill(0.0);
                col2im(&g, col, p, y);
                if self.conf.bias_term {
                    for (c, yc) in y.chunks_exact_mut(plane).enumerate() {
                        yc.iter_mut().for_each(|v| *v += bias[c]);
                    }
                }
            },
        );
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let g = self.g;
        let (k, p) = (g.col_rows(), g.col_cols());
        let (cg, kg) = self.per_group();
        let wl = self.weights_len();
        let w = &b.params[..wl];
        let image = self.channels * p;
        let plane = g.height * g.width;
        let (x, dy) = (b.bottoms[0], b.top_diffs[0]);
        let bias = self.conf.bias_term;
        let o = self.conf.num_output;
        let tasks = self.num.div_ceil(IMAGES_PER_TASK);
        let dx: Vec<Option<&mut [f32]>> = match b.bottom_diffs.first_mut() {
            Some(d) if !d.is_empty() => d[..self.num * image].chunks_mut(IMAGES_PER_TASK * image).map(Some).collect(),
            _ => (0..tasks).map(|_| None).collect(),
        };
        let partials: Vec<Vec<f32>> = dx
            .into_par_iter()
            .enumerate()
            .map_init(
                || vec![0.0f32; k * p],
                |col, (t, mut dxt)| {
                    let mut acc = vec![0.0f32; wl + if bias { o } else { 0 }];
                    let first = t * IMAGES_PER_TASK;
                    for i in first..(first + IMAGES_PER_TASK).min(self.num) {
                        let dyi = &dy[i * self.top_len()..(i + 1) * self.top_len()];
                        let xi = &x[i * image..(i + 1) * image];
                        im2col(&g, dyi, col, p);
                        for gr in 0..self.conf.group {
                            let (xg, cgr) = (&xi[gr * cg * p..(gr + 1) * cg * p], &col[gr * kg * p..(gr + 1) * kg * p]);
                            // dW_g (cg × kg) += x_g · col_gᵀ.
                            gemm(false, true, cg, kg, p, 1.0, xg, cgr, 1.0, &mut acc[gr * cg * kg..(gr + 1) * cg * kg]);
                        }
                        if bias {
                            for (db, row) in acc[wl..].iter_mut().zip(dyi.chunks_exact(plane)) {
                                *db += row.iter().sum::<f32>();
                            }
                        }
                        if let Some(dxt) = dxt.as_deref_mut() {
                            let dxi = &mut dxt[(i - first) * image..(i - first + 1) * image];
                            // dx_g (cg × p) = W_g · col_g.
                            for gr in 0..self.conf.group {
                                let (wg, cgr) =
                                    (&w[gr * cg * kg..(gr + 1) * cg * kg], &col[gr * kg * p..(gr + 1) * kg * p]);
                                gemm(
                                    false,
                                    false,
                                    cg,
                                    p,
                                    kg,
                                    1.0,
                                    wg,
                                    cgr,
                                    0.0,
                                    &mut dxi[gr * cg * p..(gr + 1) * cg * p],
                                );
                            }
                        }
                    }
                    acc
                },
            )
            .collect();
        let grad = partials.into_iter().reduce(|mut a, b| {
            a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
            a
        });
        match grad {
            Some(gr) => b.param_grad[..gr.len()].copy_from_slice(&gr),
            None => b.param_grad.fill(0.0),
        }
    }
}

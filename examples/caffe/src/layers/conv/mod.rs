//! Convolution (Caffe's `Convolution` layer, with `group`, `dilation` and
//! an optional bias): im2col + GEMM per image, one GEMM per channel group,
//! images spread over rayon's threads, weight gradients summed per thread
//! then reduced. It owns the conv math; it must never allocate per image
//! (scratch is per thread).

mod gpu;
mod lowered;

pub(crate) use lowered::Lowered;

use rayon::prelude::*;

use crate::layers::im2col::{col2im, im2col, Geometry};
use crate::layers::layer::{Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::util::blas::gemm;
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::ConvSpec;

#[derive(Debug)]
pub struct Conv {
    conf: ConvSpec,
    num: usize,
    g: Geometry,
}

impl Conv {
    pub fn new(conf: &ConvSpec, bottom: &Shape) -> Result<Conv, String> {
        let [num, channels, height, width] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        let (kh, kw) = conf.kernel;
        let (dh, dw) = conf.dilation;
        if kh == 0 || kw == 0 || dh == 0 || dw == 0 || conf.stride.0 == 0 || conf.stride.1 == 0 {
            return Err("kernel size, stride and dilation must be at least 1".into());
        }
        let group = conf.group;
        if group == 0 || channels % group != 0 || conf.num_output % group != 0 {
            return Err(format!(
                "group {group} must divide both the {channels} input channels and num_output {}",
                conf.num_output
            ));
        }
        // The span a dilated kernel covers.
        let (eh, ew) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        if height + 2 * conf.pad.0 < eh || width + 2 * conf.pad.1 < ew {
            return Err(format!("kernel spanning {eh}x{ew} is larger than the padded {height}x{width} input"));
        }
        let out_h = (height + 2 * conf.pad.0 - eh) / conf.stride.0 + 1;
        let out_w = (width + 2 * conf.pad.1 - ew) / conf.stride.1 + 1;
        let g = Geometry {
            channels,
            height,
            width,
            kernel: conf.kernel,
            stride: conf.stride,
            pad: conf.pad,
            dilation: conf.dilation,
            out_h,
            out_w,
        };
        Ok(Conv { conf: conf.clone(), num, g })
    }

    /// (output channels, column rows) of one channel group.
    fn per_group(&self) -> (usize, usize) {
        (self.conf.num_output / self.conf.group, self.g.col_rows() / self.conf.group)
    }

    /// Images per GEMM: enough output columns (about 1024) to keep the
    /// micro-kernel efficient, while leaving a group for every thread.
    fn group(&self) -> usize {
        let per_thread = self.num.div_ceil(rayon::current_num_threads().max(1));
        1024usize.div_ceil(self.g.col_cols()).clamp(1, per_thread.max(1))
    }

    fn weights_len(&self) -> usize {
        self.conf.num_output * self.per_group().1
    }
}

impl Layer for Conv {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Convolution"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![self.num, self.conf.num_output, self.g.out_h, self.g.out_w]]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let (kh, kw) = self.conf.kernel;
        let mut p = vec![ParamBlob {
            shape: vec![self.conf.num_output, self.g.channels / self.conf.group, kh, kw],
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
        let group = self.group();
        f.tops[0][..self.num * o * p].par_chunks_mut(group * o * p).enumerate().for_each_init(
            || (vec![0.0f32; k * group * p], vec![0.0f32; o * group * p]),
            |(col, yg), (gi, y)| {
                let n = y.len() / (o * p);
                let ld = n * p;
                for j in 0..n {
                    let i = gi * group + j;
                    im2col(&g, &x[i * image..(i + 1) * image], &mut col[j * p..], ld);
                }
                // One product per channel group for all n images: Y_g (og × n·p) = W_g · col_g.
                let (og, kg) = self.per_group();
                for gr in 0..self.conf.group {
                    let (wg, cg) = (&w[gr * og * kg..], &col[gr * kg * ld..(gr + 1) * kg * ld]);
                    gemm(false, false, og, ld, kg, 1.0, wg, cg, 0.0, &mut yg[gr * og * ld..(gr + 1) * og * ld]);
                }
                for j in 0..n {
                    for c in 0..o {
                        let dst = &mut y[(j * o + c) * p..(j * o + c + 1) * p];
                        dst.copy_from_slice(&yg[c * ld + j * p..c * ld + (j + 1) * p]);
                        if self.conf.bias_term {
                            let b = bias[c];
                            dst.iter_mut().for_each(|v| *v += b);
                        }
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
        let group = self.group();
        let groups = self.num.div_ceil(group);
        // One entry per group of images: where their bottom gradients go, if anywhere.
        let dx: Vec<Option<&mut [f32]>> = match b.bottom_diffs.first_mut() {
            Some(d) if !d.is_empty() => d[..self.num * image].chunks_mut(group * image).map(Some).collect(),
            _ => (0..groups).map(|_| None).collect(),
        };
        // Each group's weight gradient on its own, summed in group order
        // afterwards: the same bits in every run, whatever thread ran what.
        let partials: Vec<Vec<f32>> = dx
            .into_par_iter()
            .enumerate()
            .map_init(
                || (vec![0.0f32; k * group * p], vec![0.0f32; o * group * p]),
                |(col, dyg), (gi, dxg)| {
                    let mut acc = vec![0.0f32; wl + if bias { o } else { 0 }];
                    let n = (self.num - gi * group).min(group);
                    let ld = n * p;
                    for j in 0..n {
                        let i = gi * group + j;
                        im2col(&g, &x[i * image..(i + 1) * image], &mut col[j * p..], ld);
                        for c in 0..o {
                            let src = &dy[(i * o + c) * p..(i * o + c + 1) * p];
                            dyg[c * ld + j * p..c * ld + (j + 1) * p].copy_from_slice(src);
                        }
                    }
                    // dW_g = dY_g · col_gᵀ over the whole group of images.
                    let (og, kg) = self.per_group();
                    for gr in 0..self.conf.group {
                        let (dyr, cr) =
                            (&dyg[gr * og * ld..(gr + 1) * og * ld], &col[gr * kg * ld..(gr + 1) * kg * ld]);
                        gemm(false, true, og, kg, ld, 1.0, dyr, cr, 0.0, &mut acc[gr * og * kg..(gr + 1) * og * kg]);
                    }
                    if bias {
                        for (db, row) in acc[wl..].iter_mut().zip(dyg[..o * ld].chunks_exact(ld)) {
                            *db = row.iter().sum::<f32>();
                        }
                    }
                    if let Some(dxg) = dxg {
                        // dcol_g = W_gᵀ · dY_g, then back to images.
                        for gr in 0..self.conf.group {
                            let (wg, dyr) =
                                (&w[gr * og * kg..(gr + 1) * og * kg], &dyg[gr * og * ld..(gr + 1) * og * ld]);
                            gemm(
                                true,
                                false,
                                kg,
                                ld,
                                og,
                                1.0,
                                wg,
                                dyr,
                                0.0,
                                &mut col[gr * kg * ld..(gr + 1) * kg * ld],
                            );
                        }
                        for (j, dxi) in dxg.chunks_mut(image).enumerate() {
                            dxi.fill(0.0);
                            col2im(&g, &col[j * p..], ld, dxi);
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

//! Fully connected layer (Caffe's `InnerProduct`, axis 1): Y = X·Wᵀ + b over
//! the batch, with W stored (num_output × inputs) as Caffe stores it. The
//! products split their rows across rayon's threads. It owns this math only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::net::InnerProductConf;
use crate::util::blas::{par_gemm, par_gemm_tn};

pub struct InnerProduct {
    conf: InnerProductConf,
    num: usize,
    inputs: usize,
}

impl InnerProduct {
    pub fn new(conf: &InnerProductConf, bottom: &Shape) -> Result<InnerProduct, String> {
        let num = bottom.first().copied().unwrap_or(0);
        if num == 0 {
            return Err(format!("bottom shape {bottom:?} has no images"));
        }
        Ok(InnerProduct { conf: conf.clone(), num, inputs: count(bottom) / num })
    }
}

impl Layer for InnerProduct {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "InnerProduct"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![self.num, self.conf.num_output]]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let mut p =
            vec![ParamBlob { shape: vec![self.conf.num_output, self.inputs], filler: self.conf.weight_filler.clone() }];
        if self.conf.bias_term {
            p.push(ParamBlob { shape: vec![self.conf.num_output], filler: self.conf.bias_filler.clone() });
        }
        p
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (n, k, o) = (self.num, self.inputs, self.conf.num_output);
        let (w, bias) = f.params.split_at(o * k);
        let y = &mut f.tops[0][..n * o];
        par_gemm(true, n, o, k, 1.0, f.bottoms[0], w, 0.0, y);
        if self.conf.bias_term {
            for row in y.chunks_exact_mut(o) {
                row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let (n, k, o) = (self.num, self.inputs, self.conf.num_output);
        let dy = b.top_diffs[0];
        let (dw, db) = b.param_grad.split_at_mut(o * k);
        // dW (o×k) = dYᵀ · X
        par_gemm_tn(o, k, n, 1.0, dy, b.bottoms[0], 0.0, dw);
        if self.conf.bias_term {
            db[..o].fill(0.0);
            for row in dy[..n * o].chunks_exact(o) {
                db.iter_mut().zip(row).for_each(|(d, g)| *d += g);
            }
        }
        if let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) {
            // dX (n×k) = dY · W
            par_gemm(false, n, k, o, 1.0, dy, &b.params[..o * k], 0.0, &mut dx[..n * k]);
        }
    }
}

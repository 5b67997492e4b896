//! A learned per-channel (or per-block) scale and optional bias (Caffe's
//! `Scale` with one bottom): `y = x · γ + β`, γ shaped like the bottom's axes
//! [axis, axis + num_axes). It runs in place, so it keeps its input as
//! backward state (γ's gradient needs it). It owns this math only.

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::ScaleConf;

#[derive(Debug)]
pub struct Scale {
    conf: ScaleConf,
    shape: Shape,
    param: Shape,
    outer: usize,
    inner: usize,
}

impl Scale {
    pub fn new(conf: ScaleConf, bottom: &Shape) -> Result<Scale, String> {
        let a = axis_index(conf.axis, bottom.len())?;
        let end = match conf.num_axes {
            -1 => bottom.len(),
            k if k >= 0 && a + k as usize <= bottom.len() => a + k as usize,
            k => return Err(format!("num_axes {k} from axis {a} runs past the bottom {bottom:?}")),
        };
        Ok(Scale {
            param: bottom[a..end].to_vec(),
            outer: bottom[..a].iter().product(),
            inner: bottom[end..].iter().product(),
            shape: bottom.clone(),
            conf,
        })
    }

    fn dim(&self) -> usize {
        count(&self.param)
    }
}

impl Layer for Scale {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Scale"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let mut p = vec![ParamBlob { shape: self.param.clone(), filler: self.conf.filler.clone() }];
        if self.conf.bias_term {
            p.push(ParamBlob { shape: self.param.clone(), filler: self.conf.bias_filler.clone() });
        }
        p
    }

    fn aux_len(&self) -> usize {
        count(&self.shape)
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (d, inner) = (self.dim(), self.inner);
        let n = count(&self.shape);
        let y = &mut f.tops[0][..n];
        f.aux[..n].copy_from_slice(y);
        for (k, run) in y.chunks_exact_mut(inner).enumerate() {
            let s = k % d;
            let (g, b) = (f.params[s], if self.conf.bias_term { f.params[d + s] } else { 0.0 });
            run.iter_mut().for_each(|v| *v = *v * g + b);
        }
        debug_assert_eq!(self.outer * d * inner, n);
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let (d, inner) = (self.dim(), self.inner);
        let n = count(&self.shape);
        let Some(dy) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let grad = &mut b.param_grad[..if self.conf.bias_term { 2 * d } else { d }];
        grad.fill(0.0);
        for (k, (run, x)) in dy[..n].chunks_exact_mut(inner).zip(b.aux[..n].chunks_exact(inner)).enumerate() {
            let s = k % d;
            let g = b.params[s];
            let mut gx = 0.0;
            let mut gs = 0.0;
            for (dv, xv) in run.iter_mut().zip(x) {
                gx += *dv * xv;
                gs += *dv;
                *dv *= g;
            }
            grad[s] += gx;
            if self.conf.bias_term {
                grad[d + s] += gs;
            }
        }
    }
}

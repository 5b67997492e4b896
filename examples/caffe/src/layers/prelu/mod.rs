//! Parametric ReLU (Caffe's `PReLU`): `y = max(0, x) + a · min(0, x)` with a
//! learned slope per channel, or one shared (`channel_shared`). It runs in
//! place, so it keeps its input as backward state. It owns this math only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::layer_conf::Filler;

#[derive(Debug)]
pub struct PRelu {
    shape: Shape,
    channels: usize,
    inner: usize,
    shared: bool,
    filler: Filler,
}

impl PRelu {
    /// `filler` is Caffe's `prelu_param.filler` (default constant 0.25).
    pub fn new(channel_shared: bool, filler: Filler, bottom: &Shape) -> Result<PRelu, String> {
        if bottom.len() < 2 {
            return Err(format!("needs a bottom of (num, channels, ...), got {bottom:?}"));
        }
        Ok(PRelu {
            shape: bottom.clone(),
            channels: bottom[1],
            inner: bottom[2..].iter().product(),
            shared: channel_shared,
            filler,
        })
    }

    fn slope(&self, run: usize) -> usize {
        if self.shared {
            0
        } else {
            run % self.channels
        }
    }
}

impl Layer for PRelu {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "PReLU"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let shape = if self.shared { vec![1] } else { vec![self.channels] };
        vec![ParamBlob { shape, filler: self.filler.clone() }]
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
        let n = count(&self.shape);
        let y = &mut f.tops[0][..n];
        f.aux[..n].copy_from_slice(y);
        for (k, run) in y.chunks_exact_mut(self.inner.max(1)).enumerate() {
            let a = f.params[self.slope(k)];
            run.iter_mut().for_each(|v| *v = if *v > 0.0 { *v } else { a * *v });
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        let Some(dy) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let grad = &mut b.param_grad[..if self.shared { 1 } else { self.channels }];
        grad.fill(0.0);
        let inner = self.inner.max(1);
        for (k, (run, x)) in dy[..n].chunks_exact_mut(inner).zip(b.aux[..n].chunks_exact(inner)).enumerate() {
            let s = self.slope(k);
            let a = b.params[s];
            for (d, xv) in run.iter_mut().zip(x) {
                if *xv <= 0.0 {
                    grad[s] += *d * xv;
                    *d *= a;
                }
            }
        }
    }
}

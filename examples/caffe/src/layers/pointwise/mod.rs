//! Caffe's pointwise layers whose gradient needs the input: AbsVal
//! (`|x|`), BNLL (`log(1 + e^x)`), Log (`log_base(shift + scale·x)`) and
//! Threshold (1 where `x > t`, else 0; its gradient is zero wherever it is
//! defined, so it passes none back, where Caffe's is unimplemented). They
//! run out of place only: in place the input would be gone by backward.
//! They have GPU code (`gpu`). It
//! owns these formulas only.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape, CHUNK};
use crate::proto::layer_spec::NeuronFn;

/// Caffe's BNLL clamp: e^x beyond this would overflow.
const BNLL_THRESHOLD: f32 = 50.0;

pub struct Pointwise {
    f: NeuronFn,
    shape: Shape,
}

impl Pointwise {
    /// AbsVal, BNLL, Log or Threshold over a bottom of `shape`.
    pub fn new(f: NeuronFn, bottom: &Shape) -> Result<Pointwise, String> {
        match f {
            NeuronFn::AbsVal | NeuronFn::Bnll | NeuronFn::Log { .. } | NeuronFn::Threshold(_) => {
                Ok(Pointwise { f, shape: bottom.clone() })
            }
            other => Err(format!("{other:?} runs in place (pointwise_in_place)")),
        }
    }
}

fn ln_base(base: f32) -> f32 {
    if base == -1.0 {
        1.0
    } else {
        base.ln()
    }
}

fn value(f: NeuronFn, x: f32) -> f32 {
    match f {
        NeuronFn::AbsVal => x.abs(),
        NeuronFn::Bnll if x > 0.0 => x + (-x).exp().ln_1p(),
        NeuronFn::Bnll => x.min(BNLL_THRESHOLD).exp().ln_1p(),
        NeuronFn::Log { base, scale, shift } => (shift + scale * x).ln() / ln_base(base),
        NeuronFn::Threshold(t) => f32::from(u8::from(x > t)),
        NeuronFn::Exp { .. } | NeuronFn::Elu(_) => f32::NAN,
    }
}

fn slope(f: NeuronFn, x: f32) -> f32 {
    match f {
        NeuronFn::AbsVal => f32::from(i8::from(x > 0.0) - i8::from(x < 0.0)),
        NeuronFn::Bnll => {
            let e = x.min(BNLL_THRESHOLD).exp();
            e / (e + 1.0)
        }
        NeuronFn::Log { base, scale, shift } => scale / ((shift + scale * x) * ln_base(base)),
        NeuronFn::Threshold(_) => 0.0,
        NeuronFn::Exp { .. } | NeuronFn::Elu(_) => f32::NAN,
    }
}

impl Layer for Pointwise {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        match self.f {
            NeuronFn::AbsVal => "AbsVal",
            NeuronFn::Bnll => "BNLL",
            NeuronFn::Log { .. } => "Log",
            _ => "Threshold",
        }
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn has_backward(&self) -> bool {
        !matches!(self.f, NeuronFn::Threshold(_))
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        let func = self.f;
        f.tops[0][..n].par_chunks_mut(CHUNK).zip(f.bottoms[0][..n].par_chunks(CHUNK)).for_each(|(y, x)| {
            y.iter_mut().zip(x).for_each(|(y, x)| *y = value(func, *x));
        });
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let n = count(&self.shape);
        let func = self.f;
        let (dy, x) = (&b.top_diffs[0][..n], &b.bottoms[0][..n]);
        dx[..n].par_chunks_mut(CHUNK).zip(dy.par_chunks(CHUNK)).zip(x.par_chunks(CHUNK)).for_each(|((d, g), x)| {
            for ((d, g), x) in d.iter_mut().zip(g).zip(x) {
                *d = g * slope(func, *x);
            }
        });
    }
}

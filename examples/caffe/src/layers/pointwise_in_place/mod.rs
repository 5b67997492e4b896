//! Caffe's pointwise layers whose gradient the output gives, so they run in
//! place as Caffe's nets write them: Exp (`y = base^(shift + scale·x)`,
//! `dx = dy · y · scale · ln base`) and ELU (`y = x` for `x > 0`, else
//! `alpha (e^x − 1)`; `dx = dy` where `y > 0`, else `dy · (y + alpha)`,
//! which needs alpha >= 0). They have GPU code (`gpu`). It owns these formulas only.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape, CHUNK};
use crate::proto::layer_spec::NeuronFn;

pub struct PointwiseInPlace {
    f: NeuronFn,
    shape: Shape,
}

impl PointwiseInPlace {
    /// Exp or ELU over a bottom of `shape`.
    pub fn new(f: NeuronFn, bottom: &Shape) -> Result<PointwiseInPlace, String> {
        match f {
            NeuronFn::Exp { base, .. } if base != -1.0 && base <= 0.0 => {
                Err(format!("base {base} must be -1 (e) or positive"))
            }
            NeuronFn::Elu(alpha) if alpha.is_nan() || alpha < 0.0 => Err(format!("alpha {alpha} must be >= 0")),
            NeuronFn::Exp { .. } | NeuronFn::Elu(_) => Ok(PointwiseInPlace { f, shape: bottom.clone() }),
            other => Err(format!("{other:?} needs its input in backward (pointwise)")),
        }
    }

    /// Exp's `ln base · scale` and `base^shift`.
    fn exp_scales(&self) -> (f32, f32) {
        let NeuronFn::Exp { base, scale, shift } = self.f else { return (0.0, 0.0) };
        let ln = if base == -1.0 { 1.0 } else { base.ln() };
        (ln * scale, (ln * shift).exp())
    }
}

impl Layer for PointwiseInPlace {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        match self.f {
            NeuronFn::Exp { .. } => "Exp",
            _ => "ELU",
        }
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: true, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        let (inner, outer) = self.exp_scales();
        let func = self.f;
        f.tops[0][..n].par_chunks_mut(CHUNK).for_each(|c| match func {
            NeuronFn::Elu(alpha) => c.iter_mut().for_each(|v| *v = if *v > 0.0 { *v } else { alpha * v.exp_m1() }),
            _ => c.iter_mut().for_each(|v| *v = outer * (inner * *v).exp()),
        });
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        let y = &b.tops[0][..n];
        let Some(d) = b.bottom_diffs.first_mut() else { return };
        let (inner, _) = self.exp_scales();
        let func = self.f;
        d[..n].par_chunks_mut(CHUNK).zip(y.par_chunks(CHUNK)).for_each(|(dc, yc)| {
            for (g, t) in dc.iter_mut().zip(yc) {
                *g *= match func {
                    NeuronFn::Elu(alpha) if *t <= 0.0 => t + alpha,
                    NeuronFn::Elu(_) => 1.0,
                    _ => t * inner,
                };
            }
        });
    }
}

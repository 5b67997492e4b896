//! Caffe's `Reduction`: every axis from `axis` on reduced to one value by
//! SUM, ASUM (Σ|x|), SUMSQ (Σx²) or MEAN, times `coeff`; the top keeps the
//! axes before `axis` (none: a scalar). Backward spreads each top gradient
//! over its values (times 1, sign(x), 2x or 1/n). It owns this math only;
//! it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::standard_conf::{ReductionConf, ReductionOp};

#[derive(Debug)]
pub struct Reduction {
    op: ReductionOp,
    top: Shape,
    /// Values reduced into each top value.
    dim: usize,
    /// `coeff`, divided by `dim` for MEAN (as Caffe does).
    coeff: f32,
}

impl Reduction {
    pub fn new(conf: ReductionConf, bottom: &Shape) -> Result<Reduction, String> {
        let axis = axis_index(conf.axis, bottom.len())?;
        let dim = count(&bottom[axis..]);
        let coeff = if conf.op == ReductionOp::Mean { conf.coeff / dim.max(1) as f32 } else { conf.coeff };
        Ok(Reduction { op: conf.op, top: bottom[..axis].to_vec(), dim, coeff })
    }
}

/// Caffe's sign: 0 at 0.
fn sign(x: f32) -> f32 {
    f32::from(u8::from(x > 0.0)) - f32::from(u8::from(x < 0.0))
}

impl Layer for Reduction {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Reduction"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn backward_reads(&self) -> Reads {
        let reads_x = matches!(self.op, ReductionOp::Asum | ReductionOp::Sumsq);
        Reads { bottoms: vec![reads_x], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let num = count(&self.top);
        let x = &f.bottoms[0][..num * self.dim];
        for (y, row) in f.tops[0][..num].iter_mut().zip(x.chunks_exact(self.dim.max(1))) {
            let v: f32 = match self.op {
                ReductionOp::Sum | ReductionOp::Mean => row.iter().sum(),
                ReductionOp::Asum => row.iter().map(|v| v.abs()).sum(),
                ReductionOp::Sumsq => row.iter().map(|v| v * v).sum(),
            };
            *y = v * self.coeff;
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let num = count(&self.top);
        let dy = b.top_diffs[0];
        let dx = &mut dx[..num * self.dim];
        if dy.is_empty() {
            dx.fill(0.0);
            return;
        }
        for (i, d) in dx.chunks_exact_mut(self.dim.max(1)).enumerate() {
            let g = dy[i] * self.coeff;
            let x = &b.bottoms[0][i * self.dim..];
            match self.op {
                ReductionOp::Sum | ReductionOp::Mean => d.fill(g),
                ReductionOp::Asum => d.iter_mut().zip(x).for_each(|(d, x)| *d = g * sign(*x)),
                ReductionOp::Sumsq => d.iter_mut().zip(x).for_each(|(d, x)| *d = g * 2.0 * x),
            }
        }
    }
}

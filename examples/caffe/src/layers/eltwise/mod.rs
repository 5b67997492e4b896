//! Elementwise combination of equally shaped bottoms (Caffe's `Eltwise`):
//! a weighted sum (`coeff`, default 1 each), a product, or a maximum (the
//! first bottom wins ties; the winner's index is the backward state). The
//! product's gradient is the product of the other bottoms (Caffe's
//! `stable_prod_grad`). It owns these formulas only.

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
// Its settings, where callers building the layer look for them.
pub use crate::proto::layer_conf::EltwiseOp;

#[derive(Debug)]
pub struct Eltwise {
    op: EltwiseOp,
    shape: Shape,
    bottoms: usize,
}

impl Eltwise {
    /// `coeff` is Caffe's repeated field: empty (all 1) or one per bottom, SUM only.
    pub fn new(op: EltwiseOp, bottoms: &[Shape]) -> Result<Eltwise, String> {
        if bottoms.len() < 2 {
            return Err(format!("needs at least two bottoms, has {}", bottoms.len()));
        }
        if let Some(b) = bottoms.iter().find(|b| *b != &bottoms[0]) {
            return Err(format!("bottom shapes {:?} and {b:?} differ", bottoms[0]));
        }
        let op = match op {
            EltwiseOp::Sum(c) if c.is_empty() => EltwiseOp::Sum(vec![1.0; bottoms.len()]),
            EltwiseOp::Sum(c) if c.len() != bottoms.len() => {
                return Err(format!("has {} coeff values for {} bottoms; give one per bottom", c.len(), bottoms.len()))
            }
            op => op,
        };
        Ok(Eltwise { op, shape: bottoms[0].clone(), bottoms: bottoms.len() })
    }
}

impl Layer for Eltwise {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Eltwise"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn aux_len(&self) -> usize {
        if self.op == EltwiseOp::Max {
            count(&self.shape)
        } else {
            0
        }
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![self.op == EltwiseOp::Prod; self.bottoms], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        let y = &mut f.tops[0][..n];
        match &self.op {
            EltwiseOp::Sum(c) => {
                y.fill(0.0);
                for (x, k) in f.bottoms.iter().zip(c) {
                    y.iter_mut().zip(&x[..n]).for_each(|(v, xi)| *v += k * xi);
                }
            }
            EltwiseOp::Prod => {
                y.copy_from_slice(&f.bottoms[0][..n]);
                for x in &f.bottoms[1..] {
                    y.iter_mut().zip(&x[..n]).for_each(|(v, xi)| *v *= xi);
                }
            }
            EltwiseOp::Max => {
                let mask = &mut f.aux[..n];
                y.copy_from_slice(&f.bottoms[0][..n]);
                mask.fill(0.0);
                for (k, x) in f.bottoms.iter().enumerate().skip(1) {
                    for ((v, m), xi) in y.iter_mut().zip(mask.iter_mut()).zip(&x[..n]) {
                        if xi > v {
                            *v = *xi;
                            *m = k as f32;
                        }
                    }
                }
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        let dy = &b.top_diffs[0][..n];
        for k in 0..self.bottoms {
            let dx = &mut b.bottom_diffs[k];
            if dx.is_empty() {
                continue;
            }
            let dx = &mut dx[..n];
            match &self.op {
                EltwiseOp::Sum(c) => dx.iter_mut().zip(dy).for_each(|(d, g)| *d = c[k] * g),
                EltwiseOp::Prod => {
                    dx.copy_from_slice(dy);
                    for (_, x) in b.bottoms.iter().enumerate().filter(|(j, _)| *j != k) {
                        dx.iter_mut().zip(&x[..n]).for_each(|(d, xi)| *d *= xi);
                    }
                }
                EltwiseOp::Max => {
                    let mask = &b.aux[..n];
                    for ((d, g), m) in dx.iter_mut().zip(dy).zip(mask) {
                        *d = if *m as usize == k { *g } else { 0.0 };
                    }
                }
            }
        }
    }
}

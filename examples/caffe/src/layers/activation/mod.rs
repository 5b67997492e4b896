//! Elementwise nonlinearities: ReLU (with Caffe's negative_slope), Sigmoid
//! and TanH. They run in place on the top blob, and their backward needs only
//! the top data, so in-place use (Caffe's `bottom == top`) is exact. It owns
//! these formulas only.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape, CHUNK};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fn {
    ReLU(f32),
    Sigmoid,
    TanH,
}

pub struct Activation {
    f: Fn,
    shape: Shape,
}

impl Activation {
    pub fn new(f: Fn, bottom: &Shape) -> Activation {
        Activation { f, shape: bottom.clone() }
    }
}

impl Layer for Activation {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        match self.f {
            Fn::ReLU(_) => "ReLU",
            Fn::Sigmoid => "Sigmoid",
            Fn::TanH => "TanH",
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
        let y = &mut f.tops[0][..n];
        let func = self.f;
        y.par_chunks_mut(CHUNK).for_each(|c| match func {
            Fn::ReLU(s) => c.iter_mut().for_each(|v| *v = if *v > 0.0 { *v } else { *v * s }),
            Fn::Sigmoid => c.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
            Fn::TanH => c.iter_mut().for_each(|v| *v = v.tanh()),
        });
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        let y = &b.tops[0][..n];
        let Some(d) = b.bottom_diffs.first_mut() else { return };
        let func = self.f;
        d[..n].par_chunks_mut(CHUNK).zip(y.par_chunks(CHUNK)).for_each(|(dc, yc)| {
            for (g, t) in dc.iter_mut().zip(yc) {
                *g *= match func {
                    Fn::ReLU(s) => {
                        if *t > 0.0 {
                            1.0
                        } else {
                            s
                        }
                    }
                    Fn::Sigmoid => t * (1.0 - t),
                    Fn::TanH => 1.0 - t * t,
                };
            }
        });
    }
}

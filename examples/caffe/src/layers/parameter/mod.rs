//! Caffe's `Parameter`: a learned blob of a given shape as the layer's one
//! top (no bottom); its gradient is the top's. It owns nothing else; it
//! has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::layer_conf::Filler;

#[derive(Debug)]
pub struct Parameter {
    shape: Shape,
}

impl Parameter {
    pub fn new(shape: &Shape, bottoms: &[Shape]) -> Result<Parameter, String> {
        if !bottoms.is_empty() {
            return Err(format!("takes no bottom blob, has {}", bottoms.len()));
        }
        Ok(Parameter { shape: shape.clone() })
    }
}

impl Layer for Parameter {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Parameter"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    /// Caffe leaves the blob at zero until weights are loaded.
    fn param_blobs(&self) -> Vec<ParamBlob> {
        vec![ParamBlob { shape: self.shape.clone(), filler: Filler::Constant(0.0) }]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: Vec::new(), tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.shape);
        f.tops[0][..n].copy_from_slice(&f.params[..n]);
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        match b.top_diffs.first().filter(|d| !d.is_empty()) {
            Some(dy) => b.param_grad[..n].copy_from_slice(&dy[..n]),
            None => b.param_grad[..n].fill(0.0),
        }
    }
}

//! Caffe's `Silence`: takes any bottoms and makes no top, so blobs a net
//! computes but does not use are not reported as its outputs. Its backward
//! writes zero gradients, as Caffe's. It owns nothing else.

use crate::layers::layer::{Backward, Forward, Layer, Reads, Shape};

pub struct Silence {
    bottoms: usize,
}

impl Silence {
    pub fn new(bottoms: &[Shape]) -> Result<Silence, String> {
        if bottoms.is_empty() {
            return Err("takes at least one bottom blob".into());
        }
        Ok(Silence { bottoms: bottoms.len() })
    }
}

impl Layer for Silence {
    fn type_name(&self) -> &'static str {
        "Silence"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        Vec::new()
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false; self.bottoms], tops: false, top_diffs: false }
    }

    fn forward(&self, _: Forward<'_, '_>) {}

    fn backward(&self, b: Backward<'_, '_>) {
        for d in b.bottom_diffs.iter_mut() {
            d.fill(0.0);
        }
    }
}

//! Caffe's `ArgMax`: the indexes of the `top_k` largest values along an
//! axis (unset: over everything after the first axis, per item), with the
//! values too when `out_max_val`; ties go to the larger index, as Caffe's
//! sort of (value, index) pairs puts them. It has no backward (as in
//! Caffe) and no GPU code (a GPU run computes it on the CPU, staged). It
//! owns this selection only.

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::standard_conf::ArgMaxConf;

#[derive(Debug)]
pub struct ArgMax {
    out_max_val: bool,
    top_k: usize,
    axis: Option<usize>,
    bottom: Shape,
    top: Shape,
}

impl ArgMax {
    pub fn new(conf: ArgMaxConf, bottom: &Shape) -> Result<ArgMax, String> {
        if bottom.is_empty() {
            return Err("needs a bottom with at least one axis".into());
        }
        let k = conf.top_k;
        let (axis, top) = match conf.axis {
            Some(a) => {
                let a = axis_index(a, bottom.len())?;
                if k < 1 || k > bottom[a] {
                    return Err(format!("top_k {k} must be from 1 to axis {a}'s size {}", bottom[a]));
                }
                let mut top = bottom.clone();
                top[a] = k;
                (Some(a), top)
            }
            None => {
                let dim = count(&bottom[1..]);
                if k < 1 || k > dim {
                    return Err(format!("top_k {k} must be from 1 to the {dim} values per item"));
                }
                // Caffe's (num, 1 or 2, top_k) padded with 1s to the bottom's axes.
                let mut top = vec![1; bottom.len().max(3)];
                top[0] = bottom[0];
                top[1] = if conf.out_max_val { 2 } else { 1 };
                top[2] = k;
                (None, top)
            }
        };
        Ok(ArgMax { out_max_val: conf.out_max_val, top_k: k, axis, bottom: bottom.clone(), top })
    }
}

impl Layer for ArgMax {
    fn type_name(&self) -> &'static str {
        "ArgMax"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn has_backward(&self) -> bool {
        false
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (dim, stride) = match self.axis {
            Some(a) => (self.bottom[a], count(&self.bottom[a + 1..])),
            None => (count(&self.bottom[1..]), 1),
        };
        let x = f.bottoms[0];
        let y = &mut *f.tops[0];
        let k = self.top_k;
        let num = count(&self.bottom) / dim;
        let mut pairs: Vec<(f32, usize)> = Vec::with_capacity(dim);
        for i in 0..num {
            let (o, r) = (i / stride, i % stride);
            pairs.clear();
            pairs.extend((0..dim).map(|j| (x[(o * dim + j) * stride + r], j)));
            // Largest first; equal values: the larger index first.
            pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
            for (j, &(v, at)) in pairs[..k].iter().enumerate() {
                match (self.axis, self.out_max_val) {
                    (Some(_), true) => y[(o * k + j) * stride + r] = v,
                    (Some(_), false) | (None, false) => y[(o * k + j) * stride + r] = at as f32,
                    (None, true) => {
                        y[2 * i * k + j] = at as f32;
                        y[2 * i * k + k + j] = v;
                    }
                }
            }
        }
    }

    fn backward(&self, _: Backward<'_, '_>) {}
}

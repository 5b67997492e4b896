//! Caffe's `Bias`: `y = x + β`, β broadcast over the bottom's axes
//! [axis, axis + its own axes): a learned parameter (one bottom, shaped by
//! `num_axes`) or the second bottom. With one bottom it runs in place (the
//! gradient passes through unchanged); β's gradient is the top gradient
//! summed over the other axes. It owns this math only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::standard_conf::BiasConf;

#[derive(Debug)]
pub struct Bias {
    conf: BiasConf,
    shape: Shape,
    /// β's shape: a parameter's, or the second bottom's.
    bias: Shape,
    learned: bool,
    outer: usize,
    inner: usize,
}

impl Bias {
    pub fn new(conf: BiasConf, bottoms: &[Shape]) -> Result<Bias, String> {
        let (x, bias, start, learned) = match bottoms {
            [x] => {
                let a = axis_index(conf.axis, x.len())?;
                let end = match conf.num_axes {
                    -1 => x.len(),
                    k if k >= 0 && a + k as usize <= x.len() => a + k as usize,
                    k => return Err(format!("num_axes {k} from axis {a} runs past the bottom {x:?}")),
                };
                (x, x[a..end].to_vec(), a, true)
            }
            [x, b] => {
                // A scalar bias (no axes) applies at axis 0, as in Caffe.
                let a = if b.is_empty() { 0 } else { axis_index(conf.axis, x.len())? };
                if a + b.len() > x.len() || x[a..a + b.len()] != b[..] {
                    return Err(format!("the bias {b:?} does not match the bottom {x:?} from axis {a}"));
                }
                (x, b.clone(), a, false)
            }
            _ => return Err(format!("takes 1 or 2 bottom blobs, has {}", bottoms.len())),
        };
        let end = start + bias.len();
        Ok(Bias {
            outer: x[..start].iter().product(),
            inner: x[end..].iter().product(),
            shape: x.clone(),
            bias,
            learned,
            conf,
        })
    }

    /// Adds `beta` to `y` (outer × dim × inner).
    fn add(&self, y: &mut [f32], beta: &[f32]) {
        let dim = count(&self.bias);
        for block in y[..count(&self.shape)].chunks_exact_mut(dim * self.inner) {
            for (row, b) in block.chunks_exact_mut(self.inner).zip(beta) {
                row.iter_mut().for_each(|v| *v += b);
            }
        }
    }

    /// β's gradient: `dy` summed over the outer and inner axes.
    fn sum(&self, dy: &[f32], out: &mut [f32]) {
        let dim = count(&self.bias);
        out[..dim].fill(0.0);
        for block in dy[..count(&self.shape)].chunks_exact(dim * self.inner) {
            for (row, o) in block.chunks_exact(self.inner).zip(out.iter_mut()) {
                *o += row.iter().sum::<f32>();
            }
        }
        debug_assert_eq!(self.outer * dim * self.inner, count(&self.shape));
    }
}

impl Layer for Bias {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Bias"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        if self.learned {
            vec![ParamBlob { shape: self.bias.clone(), filler: self.conf.filler.clone() }]
        } else {
            Vec::new()
        }
    }

    fn elementwise(&self) -> bool {
        self.learned
    }

    fn backward_reads(&self) -> Reads {
        let n = if self.learned { 1 } else { 2 };
        Reads { bottoms: vec![false; n], tops: false, top_diffs: !self.learned }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        if self.learned {
            self.add(f.tops[0], f.params);
        } else {
            let n = count(&self.shape);
            f.tops[0][..n].copy_from_slice(&f.bottoms[0][..n]);
            self.add(f.tops[0], f.bottoms[1]);
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        if self.learned {
            // In place: the top gradient in bottom_diffs[0] is also the bottom's.
            self.sum(b.bottom_diffs[0], b.param_grad);
            return;
        }
        let dy = b.top_diffs[0];
        let n = count(&self.shape);
        if let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) {
            if dy.is_empty() {
                dx[..n].fill(0.0);
            } else {
                dx[..n].copy_from_slice(&dy[..n]);
            }
        }
        if let Some(db) = b.bottom_diffs.get_mut(1).filter(|d| !d.is_empty()) {
            if dy.is_empty() {
                db.fill(0.0);
            } else {
                self.sum(dy, db);
            }
        }
    }
}

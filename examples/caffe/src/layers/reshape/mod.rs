//! Shape-only layers (Caffe's `Reshape` and `Flatten`): the top holds the
//! bottom's values unchanged under a new shape; the gradient passes back
//! unchanged. It owns Caffe's shape rules (0 copies a dimension, −1 infers
//! one, `axis`/`num_axes`, `axis`/`end_axis`); it must never reorder data.

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Reshape {
    type_name: &'static str,
    top: Shape,
}

impl Reshape {
    /// Caffe's `reshape_param { shape { dim } axis num_axes }`: the bottom's
    /// axes [axis, axis + num_axes) (num_axes −1: to the end) become `dims`.
    pub fn new(dims: &[i64], axis: i64, num_axes: i64, bottom: &Shape) -> Result<Reshape, String> {
        let n = bottom.len() as i64;
        let start = if axis < 0 { axis + n + 1 } else { axis };
        if !(0..=n).contains(&start) {
            return Err(format!("axis {axis} is outside the {n}-axis bottom {bottom:?}"));
        }
        let end = if num_axes == -1 { n } else { start + num_axes };
        if num_axes < -1 || end > n {
            return Err(format!("num_axes {num_axes} from axis {start} runs past the {n}-axis bottom {bottom:?}"));
        }
        let (start, end) = (start as usize, end as usize);
        let mut mid = Vec::with_capacity(dims.len());
        let mut infer = None;
        for (i, &d) in dims.iter().enumerate() {
            match d {
                0 => mid.push(*bottom.get(start + i).ok_or_else(|| {
                    format!("dim {i} is 0 (copy) but the bottom {bottom:?} has no axis {}", start + i)
                })?),
                -1 if infer.is_none() => {
                    infer = Some(i);
                    mid.push(1);
                }
                -1 => return Err("more than one dim is -1; only one can be inferred".into()),
                d if d > 0 => mid.push(d as usize),
                d => return Err(format!("dim {d} is invalid; use a positive size, 0 to copy or -1 to infer")),
            }
        }
        let mut top: Shape = bottom[..start].to_vec();
        top.extend(&mid);
        top.extend(&bottom[end..]);
        let known = count(&top);
        if let Some(i) = infer {
            if known == 0 || count(bottom) % known != 0 {
                return Err(format!("cannot infer dim {i}: {} values do not divide into {top:?}", count(bottom)));
            }
            top[start + i] = count(bottom) / known;
        }
        if count(&top) != count(bottom) {
            return Err(format!("shape {top:?} holds {} values, the bottom {bottom:?} {}", count(&top), count(bottom)));
        }
        Ok(Reshape { type_name: "Reshape", top })
    }

    /// Caffe's `flatten_param { axis end_axis }`: axes [axis, end_axis] become one.
    pub fn flatten(axis: i64, end_axis: i64, bottom: &Shape) -> Result<Reshape, String> {
        let a = axis_index(axis, bottom.len())?;
        let e = axis_index(end_axis, bottom.len())?;
        if e < a {
            return Err(format!("end_axis {end_axis} comes before axis {axis}"));
        }
        let mut top: Shape = bottom[..a].to_vec();
        top.push(bottom[a..=e].iter().product());
        top.extend(&bottom[e + 1..]);
        Ok(Reshape { type_name: "Flatten", top })
    }
}

impl Layer for Reshape {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        self.type_name
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = count(&self.top);
        f.tops[0][..n].copy_from_slice(&f.bottoms[0][..n]);
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let n = count(&self.top);
        dx[..n].copy_from_slice(&b.top_diffs[0][..n]);
    }
}

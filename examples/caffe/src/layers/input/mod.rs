//! Caffe's `Input` layer: tops of given shapes with no bottoms, whose
//! values come from outside the net (a deploy net's image). Nothing here
//! feeds it, so its forward writes zeros, which keeps runs such as timing
//! a deploy net deterministic. It owns those shapes only.

mod gpu;

use crate::gpu::Gpu;
use crate::layers::layer::{count, Backward, Forward, GpuBackward, GpuForward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Input {
    shapes: Vec<Shape>,
}

impl Input {
    /// Caffe's `input_param { shape { dim } … }`: one shape per top, or one for all `tops`.
    pub fn new(shapes: &[Shape], tops: usize) -> Result<Input, String> {
        let shapes = match shapes {
            [one] => vec![one.clone(); tops],
            s if s.len() == tops => s.to_vec(),
            s => return Err(format!("has {} shapes for {tops} tops; give one shape, or one per top", s.len())),
        };
        if let Some(s) = shapes.iter().find(|s| s.is_empty() || count(s) == 0) {
            return Err(format!("shape {s:?} holds no value; every dim must be at least 1"));
        }
        Ok(Input { shapes })
    }
}

impl Layer for Input {
    fn on_gpu(&self) -> bool {
        true
    }

    fn forward_gpu(&self, gpu: &Gpu, f: &GpuForward<'_>) -> crate::Result<()> {
        self.forward_on(gpu, f)
    }

    fn backward_gpu(&self, _gpu: &Gpu, _b: &GpuBackward<'_>) -> crate::Result<()> {
        Ok(())
    }

    fn type_name(&self) -> &'static str {
        "Input"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        self.shapes.clone()
    }

    fn has_backward(&self) -> bool {
        false
    }

    fn backward_reads(&self) -> Reads {
        Reads::default()
    }

    fn forward(&self, f: Forward<'_, '_>) {
        for (t, s) in f.tops.iter_mut().zip(&self.shapes) {
            t[..count(s)].fill(0.0);
        }
    }

    fn backward(&self, _: Backward<'_, '_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_per_top_or_shared() {
        let one = Input::new(&[vec![2, 3, 4, 4]], 2).unwrap();
        assert_eq!(one.top_shapes(), vec![vec![2, 3, 4, 4]; 2]);
        let each = Input::new(&[vec![2, 3], vec![2]], 2).unwrap();
        assert_eq!(each.top_shapes(), vec![vec![2, 3], vec![2]]);
        assert!(Input::new(&[vec![1], vec![2], vec![3]], 2).unwrap_err().contains("3 shapes for 2 tops"));
        assert!(Input::new(&[vec![2, 0]], 1).unwrap_err().contains("no value"));
        let mut top = vec![5.0; 6];
        let mut tops: Vec<&mut [f32]> = vec![&mut top];
        each.forward(Forward { params: &[], bottoms: &[], tops: &mut tops, aux: &mut [], train: true, seed: 0 });
        assert!(top.iter().all(|v| *v == 0.0));
    }
}

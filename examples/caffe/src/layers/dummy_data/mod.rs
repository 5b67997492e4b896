//! Caffe's `DummyData` layer: tops of given shapes with no bottoms, filled
//! by their fillers on every forward (a constant filler gives the same
//! values each time; gaussian and uniform draw afresh from the call's
//! seed, so a run repeats exactly). It has no GPU code: in a GPU run it
//! computes on the CPU and its tops are staged to the GPU. It owns those
//! shapes and fillers only.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::layers::filler::fill;
use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::proto::layer_conf::Filler;

#[derive(Debug)]
pub struct DummyData {
    shapes: Vec<Shape>,
    fillers: Vec<Filler>,
}

impl DummyData {
    /// One shape and one filler per top.
    pub fn new(shapes: &[Shape], fillers: &[Filler]) -> Result<DummyData, String> {
        if shapes.len() != fillers.len() || shapes.is_empty() {
            return Err(format!("has {} shapes and {} fillers; give one of each per top", shapes.len(), fillers.len()));
        }
        if let Some(s) = shapes.iter().find(|s| s.is_empty() || count(s) == 0) {
            return Err(format!("shape {s:?} holds no value; every dim must be at least 1"));
        }
        if let Some(f) = fillers.iter().find(|f| matches!(f, Filler::Xavier(_) | Filler::Msra(_) | Filler::Bilinear)) {
            return Err(format!("data_filler {f:?}: DummyData fills with constant, uniform or gaussian"));
        }
        Ok(DummyData { shapes: shapes.to_vec(), fillers: fillers.to_vec() })
    }
}

impl Layer for DummyData {
    fn type_name(&self) -> &'static str {
        "DummyData"
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
        let mut rng = StdRng::seed_from_u64(f.seed);
        for ((t, s), filler) in f.tops.iter_mut().zip(&self.shapes).zip(&self.fillers) {
            t[..count(s)].copy_from_slice(&fill(filler, s, &mut rng));
        }
    }

    fn backward(&self, _: Backward<'_, '_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(l: &DummyData, seed: u64) -> Vec<Vec<f32>> {
        let mut tops: Vec<Vec<f32>> = l.shapes.iter().map(|s| vec![9.0; count(s)]).collect();
        let mut views: Vec<&mut [f32]> = tops.iter_mut().map(Vec::as_mut_slice).collect();
        l.forward(Forward { params: &[], bottoms: &[], tops: &mut views, aux: &mut [], train: true, seed });
        tops
    }

    #[test]
    fn constant_uniform_and_gaussian_fill_each_top() {
        let fillers =
            [Filler::Constant(2.5), Filler::Uniform { min: -1.0, max: 3.0 }, Filler::Gaussian { mean: 5.0, std: 0.5 }];
        let l = DummyData::new(&[vec![2, 3], vec![4000], vec![4000]], &fillers).unwrap();
        assert_eq!(l.top_shapes(), vec![vec![2, 3], vec![4000], vec![4000]]);
        let tops = run(&l, 7);
        assert!(tops[0].iter().all(|v| *v == 2.5));
        assert!(tops[1].iter().all(|v| (-1.0..3.0).contains(v)));
        let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
        assert!((mean(&tops[1]) - 1.0).abs() < 0.1, "{}", mean(&tops[1]));
        assert!((mean(&tops[2]) - 5.0).abs() < 0.05, "{}", mean(&tops[2]));
        // The same seed repeats; another draws afresh.
        assert_eq!(run(&l, 7), tops);
        assert_ne!(run(&l, 8)[2], tops[2]);
    }

    #[test]
    fn bad_settings_say_what_to_write() {
        let c = Filler::Constant(0.0);
        assert!(DummyData::new(&[vec![2, 0]], std::slice::from_ref(&c)).unwrap_err().contains("no value"));
        assert!(DummyData::new(&[vec![2]], &[c.clone(), c]).unwrap_err().contains("one of each per top"));
        let x = Filler::Xavier(crate::proto::layer_conf::VarianceNorm::FanIn);
        assert!(DummyData::new(&[vec![2]], &[x]).unwrap_err().contains("constant, uniform or gaussian"));
    }
}

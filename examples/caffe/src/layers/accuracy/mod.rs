//! Top-k accuracy (Caffe's `Accuracy`): the share of images whose true
//! class is among the k highest scores, ties counted against, as Caffe does.
//! Forward only.

mod gpu;

use crate::gpu::Gpu;
use crate::layers::layer::{Backward, Forward, GpuBackward, GpuForward, Layer, Reads, Shape};

pub struct Accuracy {
    top_k: usize,
    num: usize,
    classes: usize,
}

impl Accuracy {
    pub fn new(top_k: usize, scores: &Shape, labels: &Shape) -> Result<Accuracy, String> {
        let num = scores.first().copied().unwrap_or(0);
        if num == 0 || labels.first() != Some(&num) || labels.iter().product::<usize>() != num {
            return Err(format!("scores {scores:?} and labels {labels:?} need the same batch, one label per image"));
        }
        let classes = scores.iter().product::<usize>() / num;
        if top_k > classes {
            return Err(format!("top_k {top_k} is more than the {classes} classes"));
        }
        Ok(Accuracy { top_k, num, classes })
    }

    pub fn classes(&self) -> usize {
        self.classes
    }
}

impl Layer for Accuracy {
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
        "Accuracy"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![vec![1]]
    }

    fn has_backward(&self) -> bool {
        false
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false, false], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let c = self.classes;
        let (z, labels) = (f.bottoms[0], f.bottoms[1]);
        let mut correct = 0usize;
        for i in 0..self.num {
            let row = &z[i * c..(i + 1) * c];
            let truth = row[(labels[i] as usize).min(c - 1)];
            // The true class counts itself once; anything scoring at least as high beats it.
            let better = row.iter().filter(|v| **v >= truth).count() - 1;
            correct += usize::from(better < self.top_k);
        }
        f.tops[0][0] = correct as f32 / self.num as f32;
    }

    fn backward(&self, _: Backward<'_, '_>) {}
}

//! Dropout as Caffe does it: at train time each unit is kept with
//! probability 1 − ratio and scaled by 1 / (1 − ratio); at test time it is
//! the identity. The keep mask is drawn from a counter-based hash of the
//! call's seed, so it is the same whatever the thread count. It owns that.

mod gpu;

use rayon::prelude::*;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape, CHUNK};

pub struct Dropout {
    ratio: f32,
    shape: Shape,
}

impl Dropout {
    pub fn new(ratio: f32, bottom: &Shape) -> Dropout {
        Dropout { ratio, shape: bottom.clone() }
    }
}

/// A uniform draw in [0, 1) for element `i` of the call seeded `seed` (splitmix64).
fn uniform(seed: u64, i: u64) -> f32 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

impl Layer for Dropout {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Dropout"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.shape.clone()]
    }

    fn aux_len(&self) -> usize {
        count(&self.shape)
    }

    fn elementwise(&self) -> bool {
        true
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: false }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        if !f.train {
            return;
        }
        let n = count(&self.shape);
        let scale = 1.0 / (1.0 - self.ratio);
        let (ratio, seed) = (self.ratio, f.seed);
        f.tops[0][..n].par_chunks_mut(CHUNK).zip(f.aux[..n].par_chunks_mut(CHUNK)).enumerate().for_each(
            |(c, (y, m))| {
                for (j, (v, mk)) in y.iter_mut().zip(m.iter_mut()).enumerate() {
                    let keep = uniform(seed, (c * CHUNK + j) as u64) >= ratio;
                    *mk = if keep { scale } else { 0.0 };
                    *v *= *mk;
                }
            },
        );
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let n = count(&self.shape);
        let Some(d) = b.bottom_diffs.first_mut() else { return };
        d[..n].par_chunks_mut(CHUNK).zip(b.aux[..n].par_chunks(CHUNK)).for_each(|(dc, mc)| {
            dc.iter_mut().zip(mc).for_each(|(g, m)| *g *= m);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::uniform;

    #[test]
    fn draws_are_uniform_enough() {
        let n = 100_000;
        let kept = (0..n).filter(|&i| uniform(7, i) >= 0.3).count();
        assert!((kept as f64 / n as f64 - 0.7).abs() < 0.01, "{kept}");
        assert_ne!(uniform(1, 5), uniform(2, 5));
    }
}

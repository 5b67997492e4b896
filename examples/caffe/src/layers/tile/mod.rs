//! Caffe's `Tile`: `tiles` copies of the bottom's block from `axis` on,
//! side by side along that axis; backward sums the copies' gradients. It
//! owns the copying only; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{axis_index, count, Backward, Forward, Layer, Reads, Shape};

#[derive(Debug)]
pub struct Tile {
    bottom: Shape,
    axis: usize,
    tiles: usize,
}

impl Tile {
    pub fn new(axis: i64, tiles: usize, bottom: &Shape) -> Result<Tile, String> {
        let axis = axis_index(axis, bottom.len())?;
        if tiles == 0 {
            return Err("tiles must be at least 1".into());
        }
        Ok(Tile { bottom: bottom.clone(), axis, tiles })
    }

    /// (outer count, values per outer index from the axis on).
    fn split(&self) -> (usize, usize) {
        (self.bottom[..self.axis].iter().product(), self.bottom[self.axis..].iter().product())
    }
}

impl Layer for Tile {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Tile"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        let mut s = self.bottom.clone();
        s[self.axis] *= self.tiles;
        vec![s]
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let (outer, inner) = self.split();
        let x = f.bottoms[0];
        for (o, block) in f.tops[0][..outer * inner * self.tiles].chunks_exact_mut(inner * self.tiles).enumerate() {
            for copy in block.chunks_exact_mut(inner) {
                copy.copy_from_slice(&x[o * inner..(o + 1) * inner]);
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let (outer, inner) = self.split();
        let dy = b.top_diffs[0];
        dx[..count(&self.bottom)].fill(0.0);
        if dy.is_empty() {
            return;
        }
        for (o, d) in dx[..outer * inner].chunks_exact_mut(inner).enumerate() {
            for copy in dy[o * inner * self.tiles..(o + 1) * inner * self.tiles].chunks_exact(inner) {
                d.iter_mut().zip(copy).for_each(|(a, g)| *a += g);
            }
        }
    }
}

//! Tile on the GPU: forward is one `copy_rows` launch per copy (Concat's
//! row copies, each copy's rows `tiles` blocks apart in the top), backward
//! `tile.cu`'s sum of the copies' gradients in copy order. The CPU layer's
//! bits.

use super::Tile;
use crate::error::Result;
use crate::gpu::{holds, Arg, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward};

impl Tile {
    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (outer, inner) = self.split();
        let (x, y) = (f.bottoms[0], f.tops[0]);
        let total = outer * inner * self.tiles;
        holds(x, outer * inner, "Tile bottom")?;
        holds(y, total, "Tile top")?;
        for t in 0..self.tiles {
            if inner > 0 && outer > 0 {
                gpu.copy_rows((x, inner), (y.slice(t * inner, total - t * inner)?, inner * self.tiles), outer, inner)?;
            }
        }
        Ok(())
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (outer, inner) = self.split();
        holds(dx, count(&self.bottom), "Tile bottom gradient")?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty()) else {
            return gpu.zero(dx.prefix(count(&self.bottom))?);
        };
        holds(dy, outer * inner * self.tiles, "Tile top gradient")?;
        let args = [Arg::Dev(dy), Arg::Dev(dx), Arg::count(outer)?, Arg::count(inner)?, Arg::count(self.tiles)?];
        Arg::count(outer * inner * self.tiles)?;
        // SAFETY: both ranges hold what the kernel touches (checked above).
        unsafe { gpu.launch_n("tile_backward", outer * inner, &args) }
    }
}

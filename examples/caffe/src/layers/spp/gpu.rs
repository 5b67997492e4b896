//! SPP on the GPU through the pooling layer's GPU code, level by level:
//! each level pools into device scratch and Concat's `copy_rows` places it
//! in every item's row of the top; backward gathers each level's top
//! gradient the same way, pools it back into scratch and adds it to the
//! bottom gradient with `add_scaled`, in level order from zero. Pooling
//! gives the CPU's bits, so SPP does too.

use super::Spp;
use crate::error::Result;
use crate::gpu::{holds, DevSlice, Gpu};
use crate::layers::layer::{count, GpuBackward, GpuForward, Layer};

impl Spp {
    /// The largest level's values over the batch.
    fn largest_level(&self) -> usize {
        self.per_item.iter().max().copied().unwrap_or(0) * self.num
    }

    pub(super) fn forward_on(&self, gpu: &Gpu, f: &GpuForward<'_>) -> Result<()> {
        let (y, row) = (f.tops[0], self.row());
        holds(y, self.num * row, "SPP top")?;
        holds(f.aux, self.aux_len(), "SPP pooling masks")?;
        if self.num == 0 {
            return Ok(());
        }
        gpu.with_scratch(self.largest_level(), |pooled| {
            let mut aux_at = 0;
            for (l, pool) in self.levels.iter().enumerate() {
                let n = self.per_item[l];
                let level = pooled.prefix(self.num * n)?;
                let aux = f.aux.slice(aux_at, pool.aux_len())?;
                aux_at += pool.aux_len();
                let tops = [level];
                let fw = GpuForward { params: DevSlice::EMPTY, bottoms: f.bottoms, tops: &tops, aux, ..*f };
                pool.forward_gpu(gpu, &fw)?;
                let off = self.offset(l);
                gpu.copy_rows((level, n), (y.slice(off, self.num * row - off)?, row), self.num, n)?;
            }
            Ok(())
        })
    }

    pub(super) fn backward_on(&self, gpu: &Gpu, b: &GpuBackward<'_>) -> Result<()> {
        let Some(&dx) = b.bottom_diffs.first().filter(|d| !d.is_empty()) else { return Ok(()) };
        let (len, row) = (count(&self.bottom), self.row());
        let dx = dx.prefix(len)?;
        gpu.zero(dx)?;
        let Some(&dy) = b.top_diffs.first().filter(|d| !d.is_empty() && self.num > 0) else { return Ok(()) };
        holds(dy, self.num * row, "SPP top gradient")?;
        holds(b.aux, self.aux_len(), "SPP pooling masks")?;
        gpu.with_scratch(len + self.largest_level(), |scratch| {
            let level_dx = scratch.prefix(len)?;
            let mut aux_at = 0;
            for (l, pool) in self.levels.iter().enumerate() {
                let n = self.per_item[l];
                let level_dy = scratch.slice(len, self.num * n)?;
                let off = self.offset(l);
                gpu.copy_rows((dy.slice(off, self.num * row - off)?, row), (level_dy, n), self.num, n)?;
                let aux = b.aux.slice(aux_at, pool.aux_len())?;
                aux_at += pool.aux_len();
                let (top_diffs, bottom_diffs) = ([level_dy], [level_dx]);
                pool.backward_gpu(
                    gpu,
                    &GpuBackward {
                        params: DevSlice::EMPTY,
                        bottoms: &[DevSlice::EMPTY],
                        tops: &[],
                        top_diffs: &top_diffs,
                        bottom_diffs: &bottom_diffs,
                        param_grad: DevSlice::EMPTY,
                        aux,
                        loss_weight: b.loss_weight,
                    },
                )?;
                gpu.add_scaled(dx, level_dx, len, 1.0)?;
            }
            Ok(())
        })
    }
}

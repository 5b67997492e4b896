//! Caffe's `SPP` (spatial pyramid pooling): level l pools each channel into
//! about 2^l × 2^l bins (kernel ⌈size / 2^l⌉, the same stride, padding
//! split as Caffe's `GetPoolingParam`), each level flattened and the levels
//! concatenated per item; one level is the pooled blob itself. It runs the
//! pooling layer per level and owns only the pyramid's geometry and the
//! gathering; it has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, Reads, Shape};
use crate::layers::pool::Pool;
use crate::proto::layer_conf::{PoolConf, PoolRound};
use crate::proto::standard_conf::SppConf;

pub struct Spp {
    levels: Vec<Pool>,
    /// Per level: values per item (channels × bins).
    per_item: Vec<usize>,
    num: usize,
    bottom: Shape,
    top: Shape,
}

/// Caffe's window for `bins` over `size`: (kernel, pad).
fn window(size: usize, bins: usize) -> (usize, usize) {
    let kernel = size.div_ceil(bins);
    let remainder = kernel * bins - size;
    (kernel, remainder.div_ceil(2))
}

impl Spp {
    pub fn new(conf: SppConf, bottom: &Shape) -> Result<Spp, String> {
        let [num, channels, height, width] = bottom[..] else {
            return Err(format!("needs a 4-D bottom (num, channels, height, width), got {bottom:?}"));
        };
        let mut levels = Vec::new();
        let mut per_item = Vec::new();
        for l in 0..conf.pyramid_height {
            let bins = 1usize << l;
            let (kh, ph) = window(height, bins);
            let (kw, pw) = window(width, bins);
            if ph >= kh || pw >= kw {
                return Err(format!(
                    "pyramid level {l} ({bins}x{bins} bins) over {height}x{width} needs a pad as large as its kernel; \
                     lower pyramid_height to {l}"
                ));
            }
            let pc = PoolConf {
                method: conf.method,
                kernel: (kh, kw),
                stride: (kh, kw),
                pad: (ph, pw),
                global: false,
                round: PoolRound::Ceil,
            };
            let pool = Pool::new(&pc, bottom).map_err(|e| format!("pyramid level {l}: {e}"))?;
            per_item.push(count(&pool.top_shapes()[0]) / num.max(1));
            levels.push(pool);
        }
        let top = if levels.len() == 1 { levels[0].top_shapes()[0].clone() } else { vec![num, per_item.iter().sum()] };
        debug_assert!(per_item.iter().all(|n| n % channels.max(1) == 0));
        Ok(Spp { levels, per_item, num, bottom: bottom.clone(), top })
    }

    fn row(&self) -> usize {
        self.per_item.iter().sum()
    }

    /// Where level `l` starts within an item's row.
    fn offset(&self, l: usize) -> usize {
        self.per_item[..l].iter().sum()
    }
}

impl Layer for Spp {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "SPP"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        vec![self.top.clone()]
    }

    fn aux_len(&self) -> usize {
        self.levels.iter().map(|p| p.aux_len()).sum()
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![false], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let mut aux_at = 0;
        for (l, pool) in self.levels.iter().enumerate() {
            let n = self.per_item[l];
            let mut pooled = vec![0.0f32; self.num * n];
            let aux = &mut f.aux[aux_at..aux_at + pool.aux_len()];
            aux_at += pool.aux_len();
            {
                let mut tops: Vec<&mut [f32]> = vec![&mut pooled];
                pool.forward(Forward {
                    params: &[],
                    bottoms: f.bottoms,
                    tops: &mut tops,
                    aux,
                    train: f.train,
                    seed: f.seed,
                });
            }
            let (row, off) = (self.row(), self.offset(l));
            for (i, item) in pooled.chunks_exact(n).enumerate() {
                f.tops[0][i * row + off..i * row + off + n].copy_from_slice(item);
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        let Some(dx) = b.bottom_diffs.first_mut().filter(|d| !d.is_empty()) else { return };
        let len = count(&self.bottom);
        dx[..len].fill(0.0);
        let dy = b.top_diffs[0];
        if dy.is_empty() {
            return;
        }
        let mut level_dx = vec![0.0f32; len];
        let mut aux_at = 0;
        for (l, pool) in self.levels.iter().enumerate() {
            let n = self.per_item[l];
            let (row, off) = (self.row(), self.offset(l));
            let level_dy: Vec<f32> =
                (0..self.num).flat_map(|i| dy[i * row + off..i * row + off + n].iter().copied()).collect();
            let aux = &b.aux[aux_at..aux_at + pool.aux_len()];
            aux_at += pool.aux_len();
            {
                let mut d: Vec<&mut [f32]> = vec![&mut level_dx];
                pool.backward(Backward {
                    params: &[],
                    bottoms: &[&[]],
                    tops: &[],
                    top_diffs: &[&level_dy],
                    bottom_diffs: &mut d,
                    param_grad: &mut [],
                    aux,
                    loss_weight: b.loss_weight,
                });
            }
            dx[..len].iter_mut().zip(&level_dx).for_each(|(a, g)| *a += g);
        }
    }
}

//! One layer's forward or backward on the GPU, over the device addresses of
//! the geeps buffers the worker holds: the GPU twin of `net::forward_layer`
//! and `net::backward_layer` (same blob wiring, same in-place rules), and
//! which layers may take it. It never posts a buffer and never returns
//! before the GPU is done with them (the worker posts right after).

use crate::error::Result;
use crate::gpu::{holds, Arg, DevSlice, Gpu};
use crate::layers::{GpuBackward, GpuForward};
use crate::net::{Net, NetLayer};

/// The device ranges of one layer call, by blob.
#[derive(Default)]
pub(crate) struct DevIo {
    pub data_in: Vec<(usize, DevSlice)>,
    pub data_out: Vec<(usize, DevSlice)>,
    pub diff_in: Vec<(usize, DevSlice)>,
    pub diff_out: Vec<(usize, DevSlice)>,
}

fn get(list: &[(usize, DevSlice)], b: usize) -> DevSlice {
    list.iter().find(|(i, _)| *i == b).map(|(_, s)| *s).unwrap_or(DevSlice::EMPTY)
}

/// Whether layer `l` runs on the GPU: it has GPU code, and (an elementwise
/// layer out of place) its bottom gradient is wanted, which is where its
/// top gradient is staged.
pub(crate) fn runs_on_gpu(l: &NetLayer) -> bool {
    let Some(c) = &l.compute else { return false };
    let gradient_staged =
        !c.elementwise() || l.in_place || !l.backward || l.propagate.first().copied().unwrap_or(false);
    c.on_gpu() && gradient_staged
}

/// [`crate::net::forward_layer`] on the GPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward(
    gpu: &Gpu,
    net: &Net,
    li: usize,
    params: DevSlice,
    io: &DevIo,
    aux: DevSlice,
    train: bool,
    seed: u64,
) -> Result<()> {
    let l = &net.layers[li];
    let Some(c) = &l.compute else { return Ok(()) };
    let tops: Vec<DevSlice> = l.tops.iter().map(|&t| get(&io.data_out, t)).collect();
    let bottoms: Vec<DevSlice> = if c.elementwise() {
        if !l.in_place {
            let n = net.blobs[l.tops[0]].count();
            gpu.copy(get(&io.data_in, l.bottoms[0]).prefix(n)?, tops[0])?;
        }
        Vec::new()
    } else {
        l.bottoms.iter().map(|&b| get(&io.data_in, b)).collect()
    };
    c.forward_gpu(gpu, &GpuForward { params, bottoms: &bottoms, tops: &tops, aux, train, seed })
}

/// [`crate::net::backward_layer`] on the GPU; the parameter gradient goes to `grad`.
pub(crate) fn backward(
    gpu: &Gpu,
    net: &Net,
    li: usize,
    params: DevSlice,
    io: &DevIo,
    aux: DevSlice,
    grad: DevSlice,
) -> Result<()> {
    let l = &net.layers[li];
    let Some(c) = &l.compute else { return Ok(()) };
    let reads = c.backward_reads();
    let bottoms: Vec<DevSlice> = l
        .bottoms
        .iter()
        .enumerate()
        .map(
            |(k, &b)| {
                if reads.bottoms.get(k).copied().unwrap_or(false) {
                    get(&io.data_in, b)
                } else {
                    DevSlice::EMPTY
                }
            },
        )
        .collect();
    let tops: Vec<DevSlice> =
        if reads.tops { l.tops.iter().map(|&t| get(&io.data_in, t)).collect() } else { Vec::new() };
    let bottom_diffs: Vec<DevSlice> = l
        .bottoms
        .iter()
        .enumerate()
        .map(|(k, &b)| if l.propagate[k] { get(&io.diff_out, b) } else { DevSlice::EMPTY })
        .collect();
    let top_diffs: Vec<DevSlice> = if c.elementwise() {
        if !l.in_place {
            // `runs_on_gpu` admits this layer only when the bottom gradient is wanted.
            let n = net.blobs[l.tops[0]].count();
            gpu.copy(get(&io.diff_in, l.tops[0]).prefix(n)?, bottom_diffs[0])?;
        }
        Vec::new()
    } else if reads.top_diffs {
        l.tops.iter().map(|&t| get(&io.diff_in, t)).collect()
    } else {
        Vec::new()
    };
    c.backward_gpu(
        gpu,
        &GpuBackward {
            params,
            bottoms: &bottoms,
            tops: &tops,
            top_diffs: &top_diffs,
            bottom_diffs: &bottom_diffs,
            param_grad: grad,
            aux,
            loss_weight: l.loss_weight,
        },
    )
}

/// `x *= factor`, as the CPU scales a worker's share of running statistics.
pub(crate) fn scale(gpu: &Gpu, x: DevSlice, factor: f32) -> Result<()> {
    let args = [Arg::Dev(x), Arg::Dev(x), Arg::count(x.len)?, Arg::F32(factor)];
    // SAFETY: `x` is read and written over its own length.
    unsafe { gpu.launch_n("eltwise_scale_copy", x.len, &args) }
}

/// Blocks of the non-finite count (each sums its share in shared memory).
const COUNT_BLOCKS: usize = 64;

/// How many of `x`'s floats are NaN or infinite (waits for the answer).
pub(crate) fn count_nonfinite(gpu: &Gpu, x: DevSlice) -> Result<u64> {
    if x.is_empty() {
        return Ok(0);
    }
    let blocks = x.len.div_ceil(crate::gpu::BLOCK as usize).min(COUNT_BLOCKS);
    let counts = gpu.with_scratch(blocks, |counts| {
        holds(counts, blocks, "non-finite counts")?;
        let args = [Arg::Dev(x), Arg::count(x.len)?, Arg::Dev(counts)];
        // SAFETY: `x` is read over its length; one count per block is written.
        unsafe { gpu.launch_blocks("count_nonfinite", blocks, crate::gpu::BLOCK, &args)? };
        gpu.download(counts)
    })?;
    Ok(counts.iter().map(|&c| c as u64).sum())
}

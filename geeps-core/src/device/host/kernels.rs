//! The row kernels of the host device: gather, scatter-assign and scatter-add
//! over a pair index, split across cores with rayon. Small batches stay on one
//! thread, where handing work to the pool would cost more than the copy.

use rayon::prelude::*;

use crate::device::handles::{RowOp, RowPair};

/// Below this many bytes a kernel runs on the calling thread.
const PARALLEL_THRESHOLD_BYTES: usize = 1024 * 1024;
/// From this many bytes on, a gather writes with non-temporal stores.
const STREAMING_THRESHOLD_BYTES: usize = 8 * 1024 * 1024;
/// Pairs per parallel task.
const PAIRS_PER_TASK: usize = 256;

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: the kernels below write disjoint rows from different tasks.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Runs `op` over every pair.
///
/// # Safety
/// Every row named by `pairs` lies inside the memory at `store` and `buffer`
/// (rows of `width` floats); the destination rows are distinct, and no other
/// thread touches them during the call.
pub(crate) unsafe fn run(op: RowOp, pairs: &[RowPair], store: *mut f32, buffer: *mut f32, width: usize) {
    let store = SendPtr(store);
    let buffer = SendPtr(buffer);
    // Past the caches, a gather's destination is better written around them.
    let bytes = pairs.len() * width * 4;
    let streaming = bytes >= STREAMING_THRESHOLD_BYTES;
    let large = bytes >= PARALLEL_THRESHOLD_BYTES;
    let chunk = |pairs: &[RowPair]| {
        let (store, buffer) = (store, buffer);
        // SAFETY: the caller's contract covers every row of every pair.
        unsafe { run_chunk(op, pairs, store.0, buffer.0, width, large, streaming) }
    };
    if !large {
        chunk(pairs);
    } else {
        pairs.par_chunks(PAIRS_PER_TASK).for_each(chunk);
    }
}

/// Runs `op` over `pairs` on this thread, with AVX2 where the CPU has it
/// (the baseline x86-64 target only vectorises the adds 4 floats wide).
///
/// # Safety
/// As for [`run`].
unsafe fn run_chunk(
    op: RowOp,
    pairs: &[RowPair],
    store: *mut f32,
    buffer: *mut f32,
    width: usize,
    large: bool,
    streaming: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        if streaming && matches!(op, RowOp::Gather) && width % 8 == 0 && buffer as usize % 32 == 0 {
            return gather_streaming_avx2(pairs, store, buffer, width);
        }
        return run_chunk_avx2(op, pairs, store, buffer, width, large);
    }
    run_chunk_body(op, pairs, store, buffer, width, large)
}

/// Gather with non-temporal stores: the buffer is written once and read by
/// the application later, so loading its lines into the cache first (as
/// ordinary stores do) only costs bandwidth.
///
/// # Safety
/// As for [`run`]; `buffer` is 32-byte aligned and `width` a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather_streaming_avx2(pairs: &[RowPair], store: *mut f32, buffer: *mut f32, width: usize) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_stream_ps, _mm_sfence};
    for (i, p) in pairs.iter().enumerate() {
        if let Some(ahead) = pairs.get(i + PREFETCH_DISTANCE) {
            prefetch_row(store.add(ahead.store_row as usize * width), width);
        }
        let s = store.add(p.store_row as usize * width);
        let b = buffer.add(p.buffer_row as usize * width);
        let mut j = 0;
        while j < width {
            _mm256_stream_ps(b.add(j), _mm256_loadu_ps(s.add(j)));
            j += 8;
        }
    }
    // Streaming stores are weakly ordered: fence before anyone reads.
    _mm_sfence();
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_chunk_avx2(
    op: RowOp,
    pairs: &[RowPair],
    store: *mut f32,
    buffer: *mut f32,
    width: usize,
    prefetch: bool,
) {
    run_chunk_body(op, pairs, store, buffer, width, prefetch)
}

#[inline(always)]
unsafe fn run_chunk_body(
    op: RowOp,
    pairs: &[RowPair],
    store: *mut f32,
    buffer: *mut f32,
    width: usize,
    prefetch: bool,
) {
    // Scattered rows defeat the hardware prefetcher: ask for the store row a
    // few pairs ahead ourselves, unless the batch is small enough to be cached.
    for (i, p) in pairs.iter().enumerate() {
        if let Some(ahead) = pairs.get(i + PREFETCH_DISTANCE).filter(|_| prefetch) {
            prefetch_row(store.add(ahead.store_row as usize * width), width);
        }
        let s = store.add(p.store_row as usize * width);
        let b = buffer.add(p.buffer_row as usize * width);
        match op {
            RowOp::Gather => copy_row(s, b, width),
            RowOp::ScatterAssign => copy_row(b, s, width),
            RowOp::ScatterAdd => add_row(s, b, width),
        }
    }
}

/// Pairs between a prefetch and the use of its row.
const PREFETCH_DISTANCE: usize = 6;

/// Hints the cache to load one row.
///
/// # Safety
/// `row` points at `width` readable floats.
#[inline(always)]
unsafe fn prefetch_row(row: *const f32, width: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = width * 4;
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>((row as *const i8).add(off));
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, width);
}

/// Copies one row inline: a call to `memcpy` per 512-byte row costs more
/// than the copy when the rows are in cache.
///
/// # Safety
/// Both ranges are valid for `width` floats and do not overlap.
#[inline(always)]
unsafe fn copy_row(src: *const f32, dst: *mut f32, width: usize) {
    let mut i = 0;
    while i + 8 <= width {
        // Eight floats at a time; in an AVX2 context this is one load and one store.
        let chunk = std::ptr::read_unaligned(src.add(i) as *const [f32; 8]);
        std::ptr::write_unaligned(dst.add(i) as *mut [f32; 8], chunk);
        i += 8;
    }
    while i < width {
        *dst.add(i) = *src.add(i);
        i += 1;
    }
}

/// `dst[i] += src[i]` for `width` floats, in a form the compiler vectorises.
///
/// # Safety
/// Both ranges are valid for `width` floats and do not overlap.
#[inline(always)]
unsafe fn add_row(dst: *mut f32, src: *const f32, width: usize) {
    let dst = std::slice::from_raw_parts_mut(dst, width);
    let src = std::slice::from_raw_parts(src, width);
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// Parallel memcpy for large contiguous copies.
///
/// # Safety
/// Both ranges are valid for `floats` floats and do not overlap.
pub(crate) unsafe fn copy(src: *const f32, dst: *mut f32, floats: usize) {
    const BLOCK: usize = 64 * 1024;
    if floats * 4 < PARALLEL_THRESHOLD_BYTES * 4 {
        std::ptr::copy_nonoverlapping(src, dst, floats);
        return;
    }
    let src = SendPtr(src as *mut f32);
    let dst = SendPtr(dst);
    (0..floats.div_ceil(BLOCK)).into_par_iter().for_each(|b| {
        let (src, dst) = (src, dst);
        let start = b * BLOCK;
        let n = BLOCK.min(floats - start);
        // SAFETY: blocks are disjoint parts of the ranges the caller vouched for.
        unsafe { std::ptr::copy_nonoverlapping(src.0.add(start), dst.0.add(start), n) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: u32) -> Vec<RowPair> {
        (0..n).map(|i| RowPair { buffer_row: i, store_row: (i * 7 + 3) % n }).collect()
    }

    #[test]
    fn gather_scatter_add_roundtrip_small_and_parallel() {
        for (n, width) in [(10u32, 3usize), (5000, 128), (778, 33), (20_001, 128), (9001, 257)] {
            let pairs = pairs(n);
            let mut store: Vec<f32> = (0..n as usize * width).map(|i| i as f32).collect();
            let mut buffer = vec![0.0f32; n as usize * width];
            unsafe { run(RowOp::Gather, &pairs, store.as_mut_ptr(), buffer.as_mut_ptr(), width) };
            for p in &pairs {
                let b = &buffer[p.buffer_row as usize * width..][..width];
                let s = &store[p.store_row as usize * width..][..width];
                assert_eq!(b, s);
            }
            let before = store.clone();
            unsafe { run(RowOp::ScatterAdd, &pairs, store.as_mut_ptr(), buffer.as_mut_ptr(), width) };
            for (a, b) in store.iter().zip(&before) {
                assert_eq!(*a, 2.0 * b);
            }
            buffer.iter_mut().for_each(|v| *v = -1.0);
            unsafe { run(RowOp::ScatterAssign, &pairs, store.as_mut_ptr(), buffer.as_mut_ptr(), width) };
            assert!(store.iter().all(|v| *v == -1.0));
        }
    }

    #[test]
    fn parallel_copy_matches() {
        let src: Vec<f32> = (0..1_000_003).map(|i| i as f32).collect();
        let mut dst = vec![0.0f32; src.len()];
        unsafe { copy(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
        assert_eq!(src, dst);
    }
}

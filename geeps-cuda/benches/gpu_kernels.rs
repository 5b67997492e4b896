//! GPU row kernels (gather, scatter-assign, scatter-add of 128-float rows
//! through a pre-built index that scatters rows over a store twice the batch)
//! beside a device-to-device copy of the same bytes, plus host↔device copies
//! from page-locked staging; all measured in the same run. Prints each
//! kernel's bandwidth as a ratio of the copy's (target: ≥ 0.8×). Without a
//! GPU it says so and exits.
//!
//! `cargo bench -p geeps-cuda --bench gpu_kernels` (`CUDA_VISIBLE_DEVICES`
//! picks the GPU; ordinal 0 of those visible is used).

use std::time::Instant;

use geeps_core::device::{Device, DevicePtr, RowOp, RowPair, StreamId};
use geeps_cuda::{CudaConfig, CudaDevice};

const WIDTH: usize = 128;
const BATCHES: [usize; 4] = [4 * 1024, 32 * 1024, 256 * 1024, 1024 * 1024];
const REPS: usize = 50;

/// Seconds per call of `op`, over `REPS` calls enqueued back to back.
fn time(dev: &CudaDevice, s: StreamId, op: &dyn Fn()) -> f64 {
    op();
    dev.synchronize(s).unwrap();
    let t = Instant::now();
    for _ in 0..REPS {
        op();
    }
    dev.synchronize(s).unwrap();
    t.elapsed().as_secs_f64() / REPS as f64
}

fn main() {
    let dev = match CudaDevice::new(CudaConfig::ordinal(0)) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no CUDA device ({e})");
            return;
        }
    };
    println!("{}; capacity {} MiB", dev.probed(), dev.info().capacity >> 20);
    let s = dev.create_stream().unwrap();
    println!("rows     bytes      d2d copy     gather  scatter  scatter+   h2d pinned  d2h pinned");
    for rows in BATCHES {
        let floats = rows * WIDTH;
        let bytes = floats * 4;
        if 4 * bytes > dev.info().capacity {
            println!("{rows:>7}  (skipped: {} MiB needed)", (4 * bytes) >> 20);
            continue;
        }
        let store = dev.alloc(2 * floats).unwrap();
        let buffer = dev.alloc(floats).unwrap();
        let other = dev.alloc(floats).unwrap();
        let store_rows = 2 * rows as u32;
        let pairs: Vec<RowPair> = (0..rows as u32)
            .map(|i| RowPair { buffer_row: i, store_row: (i as u64 * 7919 % store_rows as u64) as u32 })
            .collect();
        let index = dev.upload_index(&pairs).unwrap();
        let mut host = dev.alloc_pinned(floats).unwrap();
        let staging = host.as_mut_ptr();
        let copy = |src: DevicePtr, dst: DevicePtr| unsafe { dev.copy_d2d(s, src, dst, floats).unwrap() };
        let d2d = time(&dev, s, &|| copy(buffer, other));
        let gather = time(&dev, s, &|| unsafe { dev.rows(s, RowOp::Gather, store, index, buffer, WIDTH).unwrap() });
        let assign =
            time(&dev, s, &|| unsafe { dev.rows(s, RowOp::ScatterAssign, store, index, buffer, WIDTH).unwrap() });
        let add = time(&dev, s, &|| unsafe { dev.rows(s, RowOp::ScatterAdd, store, index, buffer, WIDTH).unwrap() });
        let h2d = time(&dev, s, &|| unsafe { dev.copy_h2d(s, staging, buffer, floats).unwrap() });
        let d2h = time(&dev, s, &|| unsafe { dev.copy_d2h(s, other, staging, floats).unwrap() });
        // A copy and a gather each read and write `bytes`; scatter-add reads twice.
        let gbs = |secs: f64, moved: usize| moved as f64 / secs / 1e9;
        println!(
            "{rows:>7} {:>6} MiB  {:>7.1} GB/s  {:>6.2}×  {:>6.2}×  {:>6.2}×   {:>6.1} GB/s  {:>6.1} GB/s",
            bytes >> 20,
            gbs(d2d, 2 * bytes),
            d2d / gather,
            d2d / assign,
            gbs(add, 3 * bytes) / gbs(d2d, 2 * bytes),
            gbs(h2d, bytes),
            gbs(d2h, bytes),
        );
        dev.free_index(index);
        drop(host);
        unsafe {
            dev.free(store);
            dev.free(buffer);
            dev.free(other);
        }
    }
}

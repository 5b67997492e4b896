//! Host-device row kernels (gather, scatter-assign, scatter-add of 128-float
//! rows through a pre-built index) beside plain `memcpy` of the same bytes,
//! measured in the same run. Criterion reports absolute times; the summary at
//! the end prints each kernel's bandwidth as a ratio of memcpy's (target:
//! gather and scatter-add ≥ 0.8×).
//!
//! `cargo bench -p geeps-bench --bench kernels` (add `-- --quick` for a short run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use geeps::device::{Device, DevicePtr, IndexId, RowOp, RowPair, StreamId};
use geeps::HostDevice;

const WIDTH: usize = 128;
const BATCHES: [usize; 3] = [1024, 16 * 1024, 128 * 1024];

struct Setup {
    dev: Arc<HostDevice>,
    stream: StreamId,
    store: DevicePtr,
    buffer: DevicePtr,
    index: IndexId,
    src: Vec<f32>,
    dst: Vec<f32>,
}

fn setup(rows: usize) -> Setup {
    let dev = Arc::new(HostDevice::new(4 * rows * WIDTH * 4 + (1 << 20)));
    let stream = dev.create_stream().unwrap();
    let store = dev.alloc(rows * WIDTH).unwrap();
    let buffer = dev.alloc(rows * WIDTH).unwrap();
    // A fixed permutation: rows are scattered, as in a real cache.
    let pairs: Vec<RowPair> =
        (0..rows as u32).map(|i| RowPair { buffer_row: i, store_row: (i * 7919) % rows as u32 }).collect();
    let index = dev.upload_index(&pairs).unwrap();
    Setup { dev, stream, store, buffer, index, src: vec![1.0; rows * WIDTH], dst: vec![0.0; rows * WIDTH] }
}

#[derive(Clone, Copy)]
enum Kernel {
    Memcpy,
    Gather,
    ScatterAssign,
    ScatterAdd,
}

impl Kernel {
    const ALL: [Kernel; 4] = [Kernel::Memcpy, Kernel::Gather, Kernel::ScatterAssign, Kernel::ScatterAdd];
    fn name(self) -> &'static str {
        match self {
            Kernel::Memcpy => "memcpy",
            Kernel::Gather => "gather",
            Kernel::ScatterAssign => "scatter_assign",
            Kernel::ScatterAdd => "scatter_add",
        }
    }
}

fn run(s: &mut Setup, k: Kernel) {
    // SAFETY: every index row lies inside the store and the buffer.
    unsafe {
        match k {
            Kernel::Memcpy => s.dst.copy_from_slice(black_box(&s.src)),
            Kernel::Gather => s.dev.rows(s.stream, RowOp::Gather, s.store, s.index, s.buffer, WIDTH).unwrap(),
            Kernel::ScatterAssign => {
                s.dev.rows(s.stream, RowOp::ScatterAssign, s.store, s.index, s.buffer, WIDTH).unwrap()
            }
            Kernel::ScatterAdd => s.dev.rows(s.stream, RowOp::ScatterAdd, s.store, s.index, s.buffer, WIDTH).unwrap(),
        }
    }
    black_box(&s.dst);
}

fn best_of(s: &mut Setup, k: Kernel, budget: Duration) -> Duration {
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while runs < 5 || (start.elapsed() < budget && runs < 200) {
        let t = Instant::now();
        run(s, k);
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let quick = std::env::args().any(|a| a == "--quick" || a == "--test");
    for &rows in &BATCHES {
        let mut s = setup(rows);
        let mut group = c.benchmark_group(format!("rows{rows}"));
        group.throughput(Throughput::Bytes((rows * WIDTH * 4) as u64));
        for k in Kernel::ALL {
            group.bench_function(BenchmarkId::from_parameter(k.name()), |b| b.iter(|| run(&mut s, k)));
        }
        group.finish();
    }
    c.final_summary();

    println!("\nbandwidth relative to memcpy of the same bytes (best of repeated runs, same process):");
    let budget = if quick { Duration::from_millis(100) } else { Duration::from_millis(1500) };
    for &rows in &BATCHES {
        let mut s = setup(rows);
        let bytes = (rows * WIDTH * 4) as f64;
        let base = best_of(&mut s, Kernel::Memcpy, budget);
        let gbps = |d: Duration| bytes / d.as_secs_f64() / 1e9;
        print!("  {rows:>6} rows x {WIDTH} floats: memcpy {:6.2} GB/s", gbps(base));
        for k in &Kernel::ALL[1..] {
            let d = best_of(&mut s, *k, budget);
            print!(" | {} {:.2}x", k.name(), base.as_secs_f64() / d.as_secs_f64());
        }
        println!();
        // SAFETY: nothing uses the allocations after this.
        unsafe {
            s.dev.free(s.store);
            s.dev.free(s.buffer);
        }
    }
}

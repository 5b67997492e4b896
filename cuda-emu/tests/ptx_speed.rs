//! The PTX interpreter's speed on LeNet's second convolution's im2col
//! (64 images, 20 channels of 12x12, 5x5 kernel, 8x8 output), in
//! thread-instructions per second of this thread's CPU time (so other load
//! on the machine does not count) and of wall time, printed, never asserted
//! (timings vary with the machine). Run with
//! `cargo test --release -p geeps-cuda-emu --test ptx_speed -- --ignored --nocapture`.

use std::time::Instant;

use geeps_cuda_emu::ptx::{run, Geometry, Memory, Program};

#[path = "../../examples/caffe/src/gpu/ptx_modules.rs"]
mod caffe_ptx;

const IM2COL: &str = caffe_ptx::module("im2col");

#[test]
#[ignore = "a measurement, not a check: run it by name"]
fn im2col_thread_instructions_per_second() {
    let program = Program::load(IM2COL).expect("im2col.ptx parses");
    let code = program.kernel("im2col").expect("im2col decodes");
    let (channels, size, k, out) = (20u32, 12u32, 5u32, 8u32);
    let rows = (channels * k * k) as usize;
    let ld = (out * out) as usize;
    let (image_at, col_at) = (0x1000_0000u64, 0x2000_0000u64);
    let mut image = vec![0u8; (channels * size * size) as usize * 4];
    let mut col = vec![0u8; rows * ld * 4];
    let geometry: [u32; 13] = [channels, size, size, k, k, 0, 0, 1, 1, 1, 1, out, out];
    let mut params = Vec::new();
    // One image a launch: image stride, columns, ld, a run of 1.
    params.extend(image_at.to_ne_bytes());
    params.extend((channels * size * size).to_ne_bytes());
    params.extend([0u8; 4]); // the next pointer parameter is 8-byte aligned
    params.extend(col_at.to_ne_bytes());
    params.extend((ld as u32).to_ne_bytes());
    params.extend(1u32.to_ne_bytes());
    for g in geometry {
        params.extend(g.to_ne_bytes());
    }
    let threads = rows * ld;
    let geo = Geometry { grid: ((threads as u32).div_ceil(256), 1, 1), block: (256, 1, 1), dynamic_shared: 0 };
    let (start, cpu_start) = (Instant::now(), thread_cpu_seconds());
    let mut executed = 0u64;
    for _ in 0..64 {
        let mut mem = Memory::new(vec![(image_at, &mut image[..]), (col_at, &mut col[..])], params.clone(), &mut []);
        executed += run(code, geo, &mut mem).map_err(|s| s.line).expect("im2col runs");
    }
    let (secs, cpu) = (start.elapsed().as_secs_f64(), thread_cpu_seconds() - cpu_start);
    println!(
        "im2col, 64 images x {threads} threads: {executed} thread-instructions in {cpu:.3} s of CPU \
         ({secs:.3} s wall) = {:.1} M thread-instructions/s of CPU ({:.1} M/s wall)",
        executed as f64 / cpu / 1e6,
        executed as f64 / secs / 1e6
    );
}

fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; the clock id is a constant the kernel knows.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

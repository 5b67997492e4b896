//! The race detector and the free checks: two streams touching overlapping
//! bytes with no ordering edge fail the context on every seed and delay,
//! naming both operations, their streams and the bytes; ordered work,
//! concurrent reads and disjoint bytes do not; geeps' row kernels are
//! checked row by row; freeing memory that queued work uses is an error,
//! and a later access names the free; `GEEPS_CUDA_EMU_RACECHECK=0` turns
//! the detector off; and lazy streams make an unsynchronised read stale
//! every time. Each scenario runs in a child process with its settings.

mod common;

use std::ffi::c_void;
use std::ptr::null_mut;

use common::*;
use geeps_cuda_emu as emu;
use geeps_cuda_emu::result::*;

const N: usize = 4096;
const ROWS_PTX: &str = include_str!("../../geeps-cuda/kernels/rows.ptx");

/// Runs `test`'s body in a child with `envs`; its stderr if the child passed.
fn child_stderr(test: &str, envs: &[(&str, &str)]) -> String {
    let out = run_child(test, envs);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "child {test} with {envs:?} failed:\n{text}");
    text
}

/// Stream A rewrites `src` while stream B copies it, with no event between.
fn unordered_copy(src: u64, dst: u64, a: *mut c_void, b: *mut c_void) {
    unsafe {
        ok(emu::cuMemsetD32Async(src, 0, N, a));
        ok(emu::cuStreamSynchronize(a));
        ok(emu::cuMemsetD32Async(src, 7, N, a));
        ok(emu::cuMemcpyDtoDAsync_v2(dst, src, N * 4, b));
        ok(emu::cuStreamSynchronize(b));
        ok(emu::cuStreamSynchronize(a));
    }
}

#[test]
fn unordered_streams_race_on_every_seed_and_delay() {
    let name = "unordered_streams_race_on_every_seed_and_delay";
    if is_child(name) {
        open();
        let (src, dst) = (alloc(N * 4), alloc(N * 4));
        let (a, b) = (stream(1), stream(1));
        // The context fails once both have run, whichever ran first.
        unsafe {
            ok(emu::cuMemsetD32Async(src, 7, N, a));
            ok(emu::cuMemcpyDtoDAsync_v2(dst, src, N * 4, b));
        }
        code(emu::cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
        return;
    }
    for (delay, seed) in [("0", "1"), ("50", "2"), ("300", "3"), ("2000", "7"), ("50", "11")] {
        let text = child_stderr(name, &[("GEEPS_CUDA_EMU_DELAY_US", delay), ("GEEPS_CUDA_EMU_SEED", seed)]);
        assert!(text.contains("race on bytes 0x0..0x4000 of device allocation"), "{text}");
        assert!(text.contains("a memset of 16384 bytes"), "the memset is named: {text}");
        assert!(text.contains("a device-to-device copy of 16384 bytes"), "the copy is named: {text}");
        assert_eq!(text.matches("on stream #").count(), 2, "both streams are named: {text}");
    }
}

#[test]
fn the_detector_can_be_turned_off() {
    let name = "the_detector_can_be_turned_off";
    if is_child(name) {
        open();
        let (src, dst) = (alloc(N * 4), alloc(N * 4));
        unordered_copy(src, dst, stream(1), stream(1));
        ok(emu::cuCtxSynchronize());
        return;
    }
    let text = child_stderr(name, &[("GEEPS_CUDA_EMU_RACECHECK", "0")]);
    assert!(!text.contains("race on"), "{text}");
}

/// Everything the driver orders, and accesses that cannot conflict, pass.
#[test]
fn ordered_work_and_disjoint_bytes_do_not_race() {
    let name = "ordered_work_and_disjoint_bytes_do_not_race";
    if !is_child(name) {
        let text = child_stderr(name, &[("GEEPS_CUDA_EMU_DELAY_US", "300")]);
        assert!(!text.contains("race on"), "{text}");
        return;
    }
    open();
    let (src, dst, other) = (alloc(N * 4), alloc(N * 4), alloc(N * 4));
    let (a, b) = (stream(1), stream(1));
    let (blocking, legacy) = (stream(0), null_mut());
    let e = event();
    let host = pinned_u32(N);
    for k in 0..10u32 {
        unsafe {
            // An event wait orders A's write before B's copy and B's before A's next write.
            ok(emu::cuMemsetD32Async(src, k, N, a));
            ok(emu::cuEventRecord(e, a));
            ok(emu::cuStreamWaitEvent(b, e, 0));
            ok(emu::cuMemcpyDtoDAsync_v2(dst, src, N * 4, b));
            // Reads on two streams at once.
            ok(emu::cuMemcpyDtoDAsync_v2(other, src, N * 4, a));
            ok(emu::cuEventRecord(e, b));
            ok(emu::cuStreamWaitEvent(a, e, 0));
            // Disjoint halves of one allocation, on two streams.
            ok(emu::cuMemsetD32Async(dst, 1, N / 2, a));
            ok(emu::cuMemsetD32Async(dst + (N * 2) as u64, 2, N / 2, b));
            // A host synchronisation orders what follows on any stream.
            ok(emu::cuStreamSynchronize(a));
            ok(emu::cuStreamSynchronize(b));
            // The legacy stream and a blocking stream wait for each other.
            ok(emu::cuMemsetD32Async(other, 3, N, blocking));
            ok(emu::cuMemsetD32Async(other, 4, N, legacy));
            ok(emu::cuMemsetD32Async(other, 5, N, blocking));
            ok(emu::cuStreamSynchronize(blocking));
            ok(emu::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), dst, N * 4, b));
            ok(emu::cuEventRecord(e, b));
            ok(emu::cuEventSynchronize(e));
            ok(emu::cuMemcpyHtoDAsync_v2(dst, host.as_ptr().cast(), N * 4, a));
            ok(emu::cuCtxSynchronize());
        }
        assert_eq!(read_u32(dst, N)[N - 1], 2);
    }
    ok(emu::cuCtxSynchronize());
}

/// Launches row kernel `f` (`src, index, pairs, dst, width`) on `s`.
fn row_kernel(f: *mut c_void, s: *mut c_void, src: u64, index: u64, pairs: u32, dst: u64, width: u32) {
    let (mut a, mut i, mut n, mut d, mut w) = (src, index, pairs, dst, width);
    let mut args = [
        &mut a as *mut u64 as *mut c_void,
        &mut i as *mut u64 as *mut c_void,
        &mut n as *mut u32 as *mut c_void,
        &mut d as *mut u64 as *mut c_void,
        &mut w as *mut u32 as *mut c_void,
    ];
    unsafe { ok(emu::cuLaunchKernel(f, 1, 1, 1, 32, 4, 1, 0, s, args.as_mut_ptr(), null_mut())) };
}

/// Two streams scattering into one store: different rows pass, a shared row races.
#[test]
fn row_kernels_are_checked_row_by_row() {
    let name = "row_kernels_are_checked_row_by_row";
    if is_child(name) {
        open();
        let scatter = function(load_ptx(ROWS_PTX), "geeps_scatter_assign");
        let width = 8u32;
        let store = alloc(16 * width as usize * 4);
        let (buf_a, buf_b) = (upload_f32(&[1.0; 16]), upload_f32(&[2.0; 16]));
        // (buffer row, store row) pairs: A writes store rows 0 and 2, B rows 1 and 3, then B row 2.
        let (idx_a, idx_b, idx_c) = (upload_u32(&[0, 0, 1, 2]), upload_u32(&[0, 1, 1, 3]), upload_u32(&[0, 2]));
        let (a, b) = (stream(1), stream(1));
        row_kernel(scatter, a, buf_a, idx_a, 2, store, width);
        row_kernel(scatter, b, buf_b, idx_b, 2, store, width);
        ok(emu::cuCtxSynchronize());
        row_kernel(scatter, a, buf_a, idx_a, 2, store, width);
        row_kernel(scatter, b, buf_b, idx_c, 1, store, width);
        code(emu::cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
        return;
    }
    for kernels in ["interpret", "native"] {
        let text = child_stderr(name, &[("GEEPS_CUDA_EMU_KERNELS", kernels)]);
        assert_eq!(text.matches("race on").count(), 1, "{text}");
        // Store row 2 of width 8 floats: bytes 64..96.
        assert!(text.contains("race on bytes 0x40..0x60 of device allocation"), "{text}");
        assert_eq!(text.matches("kernel `geeps_scatter_assign` on stream #").count(), 2, "{text}");
    }
}

#[test]
fn freeing_memory_that_queued_work_uses_is_an_error() {
    let name = "freeing_memory_that_queued_work_uses_is_an_error";
    if is_child(name) {
        open();
        let s = stream(1);
        let synced = alloc(N * 4);
        unsafe {
            ok(emu::cuMemsetD32Async(synced, 1, N, s));
            ok(emu::cuStreamSynchronize(s));
            ok(emu::cuMemFree_v2(synced));
            let queued = alloc(N * 4);
            ok(emu::cuMemsetD32Async(queued, 1, N, s));
            code(emu::cuMemFree_v2(queued), CUDA_ERROR_ILLEGAL_ADDRESS);
            code(emu::cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
        }
        return;
    }
    for delay in ["0", "300"] {
        let text = child_stderr(name, &[("GEEPS_CUDA_EMU_DELAY_US", delay)]);
        assert!(
            text.contains("cuMemFree_v2 of device allocation")
                && text.contains("while a memset of 16384 bytes")
                && text.contains("on stream #"),
            "{text}"
        );
    }
}

/// A copy or a kernel touching freed memory names the free.
#[test]
fn an_access_after_free_names_the_free() {
    let name = "an_access_after_free_names_the_free";
    if is_child(name) {
        open();
        let gather = function(load_ptx(ROWS_PTX), "geeps_gather");
        let s = stream(1);
        let (src, idx, dst) = (upload_f32(&[1.0; 4]), upload_u32(&[0, 0]), alloc(16));
        unsafe {
            ok(emu::cuMemFree_v2(src));
            code(emu::cuMemsetD32Async(src, 0, 1, s), CUDA_ERROR_INVALID_VALUE);
        }
        row_kernel(gather, s, src, idx, 1, dst, 4);
        code(emu::cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
        return;
    }
    let text = child_stderr(name, &[("GEEPS_CUDA_EMU_LOG", "1")]);
    assert_eq!(text.matches("use after free").count(), 2, "the copy and the kernel name the free: {text}");
    assert!(text.contains("freed by cuMemFree_v2"), "{text}");
}

/// In lazy mode a read before the event is stale every time, and fresh after.
#[test]
fn lazy_streams_are_stale_until_waited_for() {
    let name = "lazy_streams_are_stale_until_waited_for";
    if !is_child(name) {
        child_stderr(name, &[("GEEPS_CUDA_EMU_LAZY", "1"), ("GEEPS_CUDA_EMU_DELAY_US", "0")]);
        return;
    }
    open();
    let dev = alloc(N * 4);
    let host = pinned_u32(N);
    let (s, e) = (stream(1), event());
    for k in 1..=20u32 {
        unsafe {
            ok(emu::cuMemsetD32Async(dev, k, N, s));
            ok(emu::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), dev, N * 4, s));
            ok(emu::cuEventRecord(e, s));
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert_ne!(std::ptr::read_volatile(host.as_ptr()), k, "nothing ran before a wait");
            ok(emu::cuEventSynchronize(e));
            assert!(host.iter().all(|&v| v == k));
            // A query asks for the work too, so polling finishes.
            ok(emu::cuMemsetD32Async(dev, 0, N, s));
            while emu::cuStreamQuery(s) == CUDA_ERROR_NOT_READY {
                std::thread::yield_now();
            }
        }
    }
}

//! The emulator exposes missing synchronisation: a copy read before its
//! event shows stale data, two streams without an event between them race,
//! and a copy from page-locked memory reads the host buffer when it runs
//! (DMA) while a pageable source is staged at the call. Each scenario runs
//! in a child process with the delays it needs.

mod common;

use std::ptr::null_mut;

use common::*;
use geeps_cuda_emu as emu;

const N: usize = 4096;
const TRIES: u32 = 20;

/// A D→H copy into page-locked memory, read on the host before its event:
/// with stream delays the old bytes show at least once; after
/// `cuEventSynchronize` the new ones always do.
#[test]
fn a_copy_read_before_its_event_is_stale() {
    let name = "a_copy_read_before_its_event_is_stale";
    if !is_child(name) {
        return child_passes(name, &[("GEEPS_CUDA_EMU_DELAY_US", "2000"), ("GEEPS_CUDA_EMU_SEED", "1")]);
    }
    open();
    let dev = alloc(N * 4);
    let host = pinned_u32(N);
    let s = stream(1);
    let e = event();
    let mut stale = 0;
    for k in 1..=TRIES {
        unsafe {
            ok(emu::cuMemsetD32Async(dev, k, N, s));
            ok(emu::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), dev, N * 4, s));
            ok(emu::cuEventRecord(e, s));
        }
        // Read without waiting: a race the emulator must make visible.
        let seen = unsafe { std::ptr::read_volatile(host.as_ptr().add(N - 1)) };
        if seen != k {
            stale += 1;
        }
        unsafe { ok(emu::cuEventSynchronize(e)) };
        assert!(host.iter().all(|&v| v == k), "after the event every word is {k}");
    }
    eprintln!("{stale} of {TRIES} unsynchronised reads were stale");
    assert!(stale >= 1, "no unsynchronised read was stale: the emulator does not expose the race");
}

/// Stream B copies what stream A writes. Without an event between them B
/// reads the old contents at least once; with `cuStreamWaitEvent` never.
#[test]
fn two_streams_without_an_event_race() {
    let name = "two_streams_without_an_event_race";
    if !is_child(name) {
        // The race detector would stop the race at once: this shows the timing alone exposes it.
        return child_passes(
            name,
            &[("GEEPS_CUDA_EMU_DELAY_US", "2000"), ("GEEPS_CUDA_EMU_SEED", "2"), ("GEEPS_CUDA_EMU_RACECHECK", "0")],
        );
    }
    open();
    let (src, dst) = (alloc(N * 4), alloc(N * 4));
    let (a, b) = (stream(1), stream(1));
    let e = event();
    let mut stale = 0;
    for with_event in [false, true] {
        for k in 1..=TRIES {
            unsafe {
                ok(emu::cuMemsetD32Async(src, 0, N, a));
                ok(emu::cuStreamSynchronize(a));
                ok(emu::cuMemsetD32Async(src, k, N, a));
                ok(emu::cuEventRecord(e, a));
                if with_event {
                    ok(emu::cuStreamWaitEvent(b, e, 0));
                }
                ok(emu::cuMemcpyDtoDAsync_v2(dst, src, N * 4, b));
                ok(emu::cuStreamSynchronize(b));
                ok(emu::cuStreamSynchronize(a));
            }
            let got = read_u32(dst, N);
            if with_event {
                assert!(got.iter().all(|&v| v == k), "with the event B always sees A's write");
            } else if got[0] != k {
                stale += 1;
            }
        }
    }
    eprintln!("{stale} of {TRIES} copies without an event were stale");
    assert!(stale >= 1, "B never overtook A: the streams do not race");
}

/// Holds stream `s` back behind a long copy on another stream, so that
/// the next operation on `s` runs milliseconds after it is enqueued.
fn gate(s: *mut std::ffi::c_void, big: (u64, u64), bytes: usize) {
    let other = stream(1);
    let e = event();
    unsafe {
        for _ in 0..8 {
            ok(emu::cuMemcpyDtoDAsync_v2(big.1, big.0, bytes, other));
        }
        ok(emu::cuEventRecord(e, other));
        ok(emu::cuStreamWaitEvent(s, e, 0));
    }
}

/// A host write to page-locked staging after the H→D copy was enqueued, but
/// before it ran, is what lands on the device (DMA reads at run time); the
/// same write to a pageable source does not (the driver staged it).
#[test]
fn pinned_sources_are_read_when_the_copy_runs() {
    let name = "pinned_sources_are_read_when_the_copy_runs";
    if !is_child(name) {
        return child_passes(name, &[("GEEPS_CUDA_EMU_DELAY_US", "0")]);
    }
    open();
    let bytes = 128 << 20;
    let big = (alloc(bytes), alloc(bytes));
    let dev = alloc(N * 4);
    let s = stream(1);
    // Page-locked: the late write wins.
    let staging = pinned_u32(N);
    staging.fill(1);
    gate(s, big, bytes);
    unsafe { ok(emu::cuMemcpyHtoDAsync_v2(dev, staging.as_ptr().cast(), N * 4, s)) };
    staging.fill(2);
    unsafe { ok(emu::cuStreamSynchronize(s)) };
    assert!(read_u32(dev, N).iter().all(|&v| v == 2), "the copy read the page-locked buffer when it ran");
    // Pageable: staged at the call, the late write is lost.
    let mut pageable = vec![3u32; N];
    gate(s, big, bytes);
    unsafe { ok(emu::cuMemcpyHtoDAsync_v2(dev, pageable.as_ptr().cast(), N * 4, s)) };
    pageable.fill(4);
    unsafe { ok(emu::cuStreamSynchronize(s)) };
    assert!(read_u32(dev, N).iter().all(|&v| v == 3), "a pageable source is snapshot at the call");
    // Pageable destination: the copy is complete when the call returns.
    let mut back = vec![0u32; N];
    gate(s, big, bytes);
    unsafe { ok(emu::cuMemcpyDtoHAsync_v2(back.as_mut_ptr().cast(), dev, N * 4, s)) };
    assert!(back.iter().all(|&v| v == 3), "a D→H copy into pageable memory is synchronous");
    let _ = null_mut::<u8>();
}

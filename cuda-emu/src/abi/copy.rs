//! Copies and memsets, async and synchronous. Every device range is resolved
//! at the call and refused (CUDA_ERROR_INVALID_VALUE) if freed, unknown or
//! out of its allocation's bounds. Host ranges in page-locked memory are
//! read or written when the copy runs on the stream (DMA); pageable sources
//! are staged at the call, and copies into pageable memory return only once
//! done, as the driver does. Must never touch a host range before deciding
//! which of the two it is.

use std::ffi::{c_uchar, c_uint, c_void};

use super::guard::{guard, key, refuse};
use crate::memory::{space, Span};
use crate::ops::{HostSource, HostTarget, Op};
use crate::pinned;
use crate::racecheck;
use crate::result::{CUresult, Res, CUDA_ERROR_INVALID_VALUE};
use crate::stream::{Stream, CU_STREAM_LEGACY};
use crate::stream_table::{self, submit};

fn device_span(call: &str, addr: u64, len: usize) -> Res<Span> {
    space().span(addr, len).or_else(|why| refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: {why}")))
}

fn host_range(call: &str, addr: usize, len: usize) -> Res<Option<std::sync::Arc<pinned::PinnedBlock>>> {
    if addr == 0 {
        return refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: a NULL host pointer"));
    }
    if space().is_device_address(addr as u64) {
        return refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: host pointer {addr:#x} is a device address"));
    }
    pinned::lookup(addr, len).or_else(|why| refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: {why}")))
}

/// Enqueues `op`; with `wait`, returns once it ran (and reports a fault).
fn run(stream: &Stream, op: Op, wait: bool) -> Res<()> {
    let seq = submit(stream, op)?;
    if wait {
        // The host waits for the copy: everything before it happens before the host's next call.
        let seen = racecheck::snapshot(stream.progress.lane);
        stream.progress.wait_for(seq);
        if let Some(c) = seen {
            racecheck::host_joins(&c);
        }
        stream.context().sticky()?;
    }
    Ok(())
}

unsafe fn h2d(call: &'static str, dst: u64, src: *const c_void, bytes: usize, hs: u64, sync: bool) -> CUresult {
    guard(call, || {
        let stream = stream_table::resolve(hs)?;
        if bytes == 0 {
            return Ok(());
        }
        let dst = device_span(call, dst, bytes)?;
        let source = match host_range(call, src as usize, bytes)? {
            Some(block) => HostSource::Pinned { block, addr: src as usize },
            None => HostSource::Staged(std::slice::from_raw_parts(src as *const u8, bytes).to_vec()),
        };
        run(&stream, Op::HostToDevice { dst, src: source }, sync)
    })
}

unsafe fn d2h(call: &'static str, dst: *mut c_void, src: u64, bytes: usize, hs: u64, sync: bool) -> CUresult {
    guard(call, || {
        let stream = stream_table::resolve(hs)?;
        if bytes == 0 {
            return Ok(());
        }
        let src = device_span(call, src, bytes)?;
        let block = host_range(call, dst as usize, bytes)?;
        let pageable = block.is_none();
        run(&stream, Op::DeviceToHost { src, dst: HostTarget { block, addr: dst as usize } }, sync || pageable)
    })
}

fn d2d(call: &'static str, dst: u64, src: u64, bytes: usize, hs: u64, sync: bool) -> CUresult {
    guard(call, || {
        let stream = stream_table::resolve(hs)?;
        if bytes == 0 {
            return Ok(());
        }
        let (src, dst) = (device_span(call, src, bytes)?, device_span(call, dst, bytes)?);
        run(&stream, Op::DeviceToDevice { src, dst }, sync)
    })
}

fn memset(call: &'static str, dst: u64, value: u32, width: usize, count: usize, hs: u64, sync: bool) -> CUresult {
    guard(call, || {
        let stream = stream_table::resolve(hs)?;
        if count == 0 {
            return Ok(());
        }
        if dst % width as u64 != 0 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("{call}: {dst:#x} is not {width}-byte aligned"));
        }
        let bytes = count.checked_mul(width).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let dst = device_span(call, dst, bytes)?;
        run(&stream, Op::Memset { dst, value, width }, sync)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, bytes: usize, s: *mut c_void) -> CUresult {
    h2d("cuMemcpyHtoDAsync_v2", dst, src, bytes, key(s), false)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, bytes: usize, s: *mut c_void) -> CUresult {
    d2h("cuMemcpyDtoHAsync_v2", dst, src, bytes, key(s), false)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, bytes: usize, s: *mut c_void) -> CUresult {
    d2d("cuMemcpyDtoDAsync_v2", dst, src, bytes, key(s), false)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(dst: u64, src: *const c_void, bytes: usize) -> CUresult {
    h2d("cuMemcpyHtoD_v2", dst, src, bytes, CU_STREAM_LEGACY, true)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(dst: *mut c_void, src: u64, bytes: usize) -> CUresult {
    d2h("cuMemcpyDtoH_v2", dst, src, bytes, CU_STREAM_LEGACY, true)
}

#[no_mangle]
pub extern "C" fn cuMemcpyDtoD_v2(dst: u64, src: u64, bytes: usize) -> CUresult {
    d2d("cuMemcpyDtoD_v2", dst, src, bytes, CU_STREAM_LEGACY, true)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(dst: u64, value: c_uchar, count: usize, s: *mut c_void) -> CUresult {
    memset("cuMemsetD8Async", dst, value as u32, 1, count, key(s), false)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemsetD32Async(dst: u64, value: c_uint, count: usize, s: *mut c_void) -> CUresult {
    memset("cuMemsetD32Async", dst, value, 4, count, key(s), false)
}

#[no_mangle]
pub extern "C" fn cuMemsetD8_v2(dst: u64, value: c_uchar, count: usize) -> CUresult {
    memset("cuMemsetD8_v2", dst, value as u32, 1, count, CU_STREAM_LEGACY, true)
}

#[no_mangle]
pub extern "C" fn cuMemsetD32_v2(dst: u64, value: c_uint, count: usize) -> CUresult {
    memset("cuMemsetD32_v2", dst, value, 4, count, CU_STREAM_LEGACY, true)
}

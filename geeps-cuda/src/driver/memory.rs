//! Driver calls that allocate, free, copy and clear memory. Copies and clears
//! are enqueued on a stream and return at once (for page-locked host memory;
//! the driver stages pageable memory itself). Callers own every address they
//! pass; nothing here tracks or checks them.

use std::ffi::c_void;

use cudarc::driver::result;
use cudarc::driver::sys;
use geeps_core::Result;

use super::errors::{check, error};
use super::stream::Stream;

/// `bytes` of device memory (uninitialised).
pub(crate) fn mem_alloc(bytes: usize) -> Result<u64> {
    // SAFETY: a plain allocation in the current context.
    unsafe { result::malloc_sync(bytes) }.map_err(|e| error(&format!("allocating {bytes} bytes of GPU memory"), e))
}

/// # Safety
/// `ptr` came from [`mem_alloc`] and no enqueued work uses it.
pub(crate) unsafe fn mem_free(ptr: u64) -> Result<()> {
    result::free_sync(ptr).map_err(|e| error(&format!("freeing GPU memory at {ptr:#x}"), e))
}

/// `bytes` of page-locked host memory (uninitialised).
pub(crate) fn host_alloc(bytes: usize) -> Result<*mut c_void> {
    // SAFETY: a plain allocation; flags 0 = pinned for the current context.
    unsafe { result::malloc_host(bytes, 0) }
        .map_err(|e| error(&format!("allocating {bytes} bytes of page-locked host memory"), e))
}

/// # Safety
/// `ptr` came from [`host_alloc`] and nothing uses it any more.
pub(crate) unsafe fn host_free(ptr: *mut c_void) -> Result<()> {
    result::free_host(ptr).map_err(|e| error("freeing page-locked host memory", e))
}

/// (free, total) bytes of the current context's GPU.
pub(crate) fn mem_get_info() -> Result<(usize, usize)> {
    result::mem_get_info().map_err(|e| error("querying free GPU memory", e))
}

/// # Safety
/// `src` is readable for `bytes` until the copy completes; `dst` is a live
/// device range of `bytes`.
pub(crate) unsafe fn memcpy_h2d(stream: Stream, dst: u64, src: *const c_void, bytes: usize) -> Result<()> {
    check(sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream.raw()), "enqueueing a host-to-GPU copy")
}

/// # Safety
/// `src` is a live device range of `bytes`; `dst` is writable for `bytes`
/// until the copy completes.
pub(crate) unsafe fn memcpy_d2h(stream: Stream, dst: *mut c_void, src: u64, bytes: usize) -> Result<()> {
    check(sys::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream.raw()), "enqueueing a GPU-to-host copy")
}

/// # Safety
/// Both are live, non-overlapping device ranges of `bytes`.
pub(crate) unsafe fn memcpy_d2d(stream: Stream, dst: u64, src: u64, bytes: usize) -> Result<()> {
    check(sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.raw()), "enqueueing a GPU-to-GPU copy")
}

/// Zeroes `words` 32-bit words at `dst`.
///
/// # Safety
/// `dst` is a live device range of `words` words.
pub(crate) unsafe fn memset_zero(stream: Stream, dst: u64, words: usize) -> Result<()> {
    check(sys::cuMemsetD32Async(dst, 0, words, stream.raw()), "enqueueing a GPU memory clear")
}

//! `geeps_cuda_emu_declare_extents(ranges, count)`: the emulator's entry
//! point for declaring the bytes each pointer argument of the calling
//! thread's next `cuLaunchKernel` covers (`count` pairs of address and
//! byte length in `ranges`; see `extents`). A real driver has no such
//! symbol. Must never keep the caller's array.

use std::panic::AssertUnwindSafe;

use crate::extents;
use crate::result::{CUresult, CUDA_ERROR_INVALID_VALUE, CUDA_SUCCESS};

/// Declares the extents of this thread's next launch; ignored with `GEEPS_CUDA_EMU_GUARD=0`.
///
/// # Safety
/// `ranges` points at `2 * count` readable `u64`s (or `count` is 0).
#[no_mangle]
pub unsafe extern "C" fn geeps_cuda_emu_declare_extents(ranges: *const u64, count: usize) -> CUresult {
    if count > 0 && ranges.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let Some(words) = count.checked_mul(2) else { return CUDA_ERROR_INVALID_VALUE };
    let pairs: Vec<(u64, u64)> = if count == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        let w = unsafe { std::slice::from_raw_parts(ranges, words) };
        w.chunks_exact(2).map(|c| (c[0], c[1])).collect()
    };
    match std::panic::catch_unwind(AssertUnwindSafe(|| extents::declare(pairs))) {
        Ok(()) => CUDA_SUCCESS,
        Err(_) => CUDA_ERROR_INVALID_VALUE,
    }
}

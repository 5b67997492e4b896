//! What every export shares: running its body so that no panic crosses the
//! C ABI, refusing a call with a logged reason, writing output pointers,
//! and converting between handles and registry keys. Must never call into
//! the emulator's state (the exports do).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::log;
use crate::result::{
    label, CUresult, Res, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS,
};

/// Runs an export's body: its error code, or CUDA_ERROR_UNKNOWN if it panicked.
pub(super) fn guard(name: &'static str, body: impl FnOnce() -> Res<()>) -> CUresult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUDA_SUCCESS,
        Ok(Err(code)) => {
            if code != CUDA_ERROR_NOT_READY {
                log::debug(|| format!("{name} returned {}", label(code)));
            }
            code
        }
        Err(_) => {
            log::fault(&format!("{name} panicked inside the emulator; returning CUDA_ERROR_UNKNOWN"));
            CUDA_ERROR_UNKNOWN
        }
    }
}

/// Refuses a call with `code`, saying why in the debug log.
pub(super) fn refuse<T>(code: CUresult, why: impl FnOnce() -> String) -> Res<T> {
    log::debug(|| format!("refused ({}): {}", label(code), why()));
    Err(code)
}

/// Writes `value` through an output pointer, or INVALID_VALUE for NULL.
pub(super) unsafe fn put<T>(out: *mut T, value: T) -> Res<()> {
    if out.is_null() {
        return refuse(CUDA_ERROR_INVALID_VALUE, || "a NULL output pointer".into());
    }
    out.write(value);
    Ok(())
}

/// A handle argument as the registry key it is.
pub(super) fn key<T>(handle: *mut T) -> u64 {
    handle as usize as u64
}

/// A registry key as the handle type the API passes.
pub(super) fn handle<T>(key: u64) -> *mut T {
    key as usize as *mut T
}

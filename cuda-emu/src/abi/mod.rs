//! The exported C entry points of the driver API, with `cuda.h`'s exact
//! signatures and symbol names (the versioned ones, e.g. `cuMemAlloc_v2`,
//! that cudarc resolves). Every export runs inside `guard`, so no panic
//! crosses the C ABI, and turns its arguments into calls on the emulator's
//! modules. Must never dereference a handle (handles are registry keys) nor
//! hold an emulator lock while blocking.
//!
//! Safety of the exports: each has the contract of its driver API function
//! (valid output pointers, host ranges readable or writable for the sizes
//! given); the `# Safety` sections are NVIDIA's documentation.
#![allow(non_snake_case, clippy::missing_safety_doc)]

mod context;
mod copy;
mod cublas;
mod device;
mod event;
mod init;
mod memory;
mod module;
mod stream;

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use context::*;
pub use copy::*;
pub use cublas::*;
pub use device::*;
pub use event::*;
pub use init::*;
pub use memory::*;
pub use module::*;
pub use stream::*;

use crate::log;
use crate::result::{
    label, CUresult, Res, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CUDA_ERROR_UNKNOWN, CUDA_SUCCESS,
};

/// Runs an export's body: its error code, or CUDA_ERROR_UNKNOWN if it panicked.
fn guard(name: &'static str, body: impl FnOnce() -> Res<()>) -> CUresult {
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
fn refuse<T>(code: CUresult, why: impl FnOnce() -> String) -> Res<T> {
    log::debug(|| format!("refused ({}): {}", label(code), why()));
    Err(code)
}

/// Writes `value` through an output pointer, or INVALID_VALUE for NULL.
unsafe fn put<T>(out: *mut T, value: T) -> Res<()> {
    if out.is_null() {
        return refuse(CUDA_ERROR_INVALID_VALUE, || "a NULL output pointer".into());
    }
    out.write(value);
    Ok(())
}

/// A handle argument as the registry key it is.
fn key<T>(handle: *mut T) -> u64 {
    handle as usize as u64
}

/// A registry key as the handle type the API passes.
fn handle<T>(key: u64) -> *mut T {
    key as usize as *mut T
}

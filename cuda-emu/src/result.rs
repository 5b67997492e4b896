//! The driver's `CUresult` codes (numeric values as in CUDA 12's `cuda.h`,
//! checked against cudarc's bindings) with their names and descriptions, as
//! static C strings for `cuGetErrorName` / `cuGetErrorString`. Owns no state;
//! must never invent a code the real driver does not have (cudarc turns the
//! returned integer into a Rust enum, so an unknown value would be UB there).

use std::ffi::CStr;

/// A driver result code.
pub type CUresult = u32;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_DEINITIALIZED: CUresult = 4;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
pub const CUDA_ERROR_INVALID_IMAGE: CUresult = 200;
pub const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
pub const CUDA_ERROR_INVALID_PTX: CUresult = 218;
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const CUDA_ERROR_NOT_READY: CUresult = 600;
pub const CUDA_ERROR_ILLEGAL_ADDRESS: CUresult = 700;
pub const CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: CUresult = 701;
pub const CUDA_ERROR_MISALIGNED_ADDRESS: CUresult = 716;
pub const CUDA_ERROR_LAUNCH_FAILED: CUresult = 719;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;
pub const CUDA_ERROR_UNKNOWN: CUresult = 999;

/// What a fallible step of the emulator returns: the code to hand back.
pub type Res<T> = Result<T, CUresult>;

const TABLE: &[(CUresult, &CStr, &CStr)] = &[
    (CUDA_SUCCESS, c"CUDA_SUCCESS", c"no error"),
    (CUDA_ERROR_INVALID_VALUE, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
    (CUDA_ERROR_OUT_OF_MEMORY, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (CUDA_ERROR_NOT_INITIALIZED, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
    (CUDA_ERROR_DEINITIALIZED, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
    (CUDA_ERROR_NO_DEVICE, c"CUDA_ERROR_NO_DEVICE", c"no CUDA-capable device is detected"),
    (CUDA_ERROR_INVALID_DEVICE, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
    (CUDA_ERROR_INVALID_IMAGE, c"CUDA_ERROR_INVALID_IMAGE", c"device kernel image is invalid"),
    (CUDA_ERROR_INVALID_CONTEXT, c"CUDA_ERROR_INVALID_CONTEXT", c"invalid device context"),
    (CUDA_ERROR_INVALID_PTX, c"CUDA_ERROR_INVALID_PTX", c"a PTX JIT compilation failed"),
    (CUDA_ERROR_INVALID_HANDLE, c"CUDA_ERROR_INVALID_HANDLE", c"invalid resource handle"),
    (CUDA_ERROR_NOT_FOUND, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
    (CUDA_ERROR_NOT_READY, c"CUDA_ERROR_NOT_READY", c"device not ready"),
    (CUDA_ERROR_ILLEGAL_ADDRESS, c"CUDA_ERROR_ILLEGAL_ADDRESS", c"an illegal memory access was encountered"),
    (
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        c"too many resources requested for launch",
    ),
    (CUDA_ERROR_MISALIGNED_ADDRESS, c"CUDA_ERROR_MISALIGNED_ADDRESS", c"misaligned address"),
    (CUDA_ERROR_LAUNCH_FAILED, c"CUDA_ERROR_LAUNCH_FAILED", c"unspecified launch failure"),
    (CUDA_ERROR_NOT_SUPPORTED, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
    (CUDA_ERROR_UNKNOWN, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

/// The code's name, e.g. `CUDA_ERROR_INVALID_VALUE`, for every code the emulator returns.
pub fn name(code: CUresult) -> Option<&'static CStr> {
    TABLE.iter().find(|(c, _, _)| *c == code).map(|(_, n, _)| *n)
}

/// The driver's description of the code.
pub fn describe(code: CUresult) -> Option<&'static CStr> {
    TABLE.iter().find(|(c, _, _)| *c == code).map(|(_, _, d)| *d)
}

/// The code's name as text, for log lines.
pub fn label(code: CUresult) -> String {
    name(code).map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| format!("CUresult {code}"))
}

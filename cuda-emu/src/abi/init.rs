//! `cuInit`, `cuDriverGetVersion` and the error strings. Must never require
//! initialisation for what the driver answers before `cuInit`.

use std::ffi::{c_char, c_int, c_uint};

use super::guard::{guard, put, refuse};
use crate::config::config;
use crate::context;
use crate::result::{self, CUresult, CUDA_ERROR_INVALID_VALUE};

#[no_mangle]
pub extern "C" fn cuInit(flags: c_uint) -> CUresult {
    guard("cuInit", || {
        if flags != 0 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("cuInit flags {flags} (must be 0)"));
        }
        context::init()
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    guard("cuDriverGetVersion", || put(version, config().driver_version))
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, out: *mut *const c_char) -> CUresult {
    guard("cuGetErrorName", || match result::name(error) {
        Some(s) => put(out, s.as_ptr()),
        None => {
            let _ = put(out, std::ptr::null());
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, out: *mut *const c_char) -> CUresult {
    guard("cuGetErrorString", || match result::describe(error) {
        Some(s) => put(out, s.as_ptr()),
        None => {
            let _ = put(out, std::ptr::null());
            Err(CUDA_ERROR_INVALID_VALUE)
        }
    })
}

//! Registering the native kernels with the emulated driver: the table
//! (every kernel's name and parameter sizes, with the shared callbacks) is
//! built and handed to `geeps_cuda_emu_register_native_kernels`, found with
//! `dlsym` on the loaded `libcuda.so.1` when `GEEPS_CUDA_EMU` is set (as
//! `scripts/with-cuda-emu` sets it). Must never do anything on a real
//! driver: without that symbol nothing happens.

use std::ffi::CString;
use std::sync::Once;

use super::abi::{NativeKernel, RegisterFn, NATIVE_KERNELS_ABI};
use super::callbacks;
use super::table::{signature, ALL};

/// Builds the registration table and hands it to `register` (which must
/// copy it: it lives for the call only); `register`'s code.
pub fn with_table(register: impl FnOnce(*const NativeKernel, usize) -> u32) -> u32 {
    let names: Vec<CString> =
        ALL.iter().map(|&k| CString::new(signature(k).0).expect("kernel names hold no NUL")).collect();
    let table: Vec<NativeKernel> = ALL
        .iter()
        .zip(&names)
        .map(|(&k, name)| {
            let params = signature(k).1;
            NativeKernel {
                name: name.as_ptr(),
                params: params.as_ptr(),
                param_count: params.len(),
                claims: callbacks::claims,
                run: callbacks::run,
            }
        })
        .collect();
    register(table.as_ptr(), table.len())
}

/// Registers the kernels with `register_fn` (the emulator's entry point).
///
/// # Safety
/// `register_fn` is `geeps_cuda_emu_register_native_kernels` of ABI 1.
pub unsafe fn register_with(register_fn: RegisterFn) -> u32 {
    with_table(|table, count| unsafe { register_fn(NATIVE_KERNELS_ABI, table, count) })
}

/// Once per process, when running under the emulated driver: registers the
/// native kernels with it. A failure only leaves the PTX interpreted.
pub(crate) fn register_if_emulated() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("GEEPS_CUDA_EMU").is_none() {
            return;
        }
        // SAFETY: loads the driver cudarc has loaded already; the emulator's
        // entry point has the signature of `RegisterFn`.
        unsafe {
            let Ok(lib) = libloading::Library::new("libcuda.so.1") else { return };
            if let Ok(register) = lib.get::<RegisterFn>(b"geeps_cuda_emu_register_native_kernels\0") {
                let code = register_with(*register);
                if code != 0 {
                    tracing::warn!(
                        "the emulated driver refused the native kernels (code {code}); they run interpreted"
                    );
                }
            }
            // The driver stays loaded for the process, as cudarc keeps it.
            std::mem::forget(lib);
        }
    });
}

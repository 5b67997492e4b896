//! Loading PTX into the context (the driver JIT-compiles it for the GPU and
//! caches the result) and launching its kernels. Knows nothing of what the
//! kernels do; the caller passes the arguments in the kernel's order.

use std::ffi::{c_uint, c_void, CString};

use cudarc::driver::result;
use cudarc::driver::sys;
use geeps_core::{Error, Result};

use super::errors::{check, error};
use super::stream::Stream;
use crate::launch::LaunchShape;

#[derive(Clone, Copy)]
pub(crate) struct Module(sys::CUmodule);

#[derive(Clone, Copy)]
pub(crate) struct Function(sys::CUfunction);

// SAFETY: driver handles, usable from any thread with the context current.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

/// Bytes of JIT log kept for an error message.
const LOG_BYTES: usize = 8192;

impl Module {
    /// Loads `ptx`, with the JIT compiler's log in the error if it fails.
    pub(crate) fn load_ptx(ptx: &str) -> Result<Module> {
        let image = CString::new(ptx).map_err(|_| Error::Device("kernel PTX contains a NUL byte".into()))?;
        let mut log = vec![0u8; LOG_BYTES];
        let mut options =
            [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        // The driver reads option values as pointer-sized words.
        let mut values = [log.as_mut_ptr() as *mut c_void, LOG_BYTES as *mut c_void];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the image is NUL-terminated; the log buffer outlives the call
        // and its size is passed alongside.
        let code = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr() as *const c_void,
                options.len() as c_uint,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        code.result().map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..end]);
            match error("loading geeps' kernels (JIT-compiling their PTX)", e) {
                Error::Device(m) if !log.trim().is_empty() => Error::Device(format!("{m}; JIT log: {}", log.trim())),
                other => other,
            }
        })?;
        Ok(Module(module))
    }

    pub(crate) fn function(self, name: &str) -> Result<Function> {
        let cname =
            CString::new(name).map_err(|_| Error::Device(format!("kernel name {name:?} contains a NUL byte")))?;
        // SAFETY: the module is loaded until `unload`.
        unsafe { result::module::get_function(self.0, cname) }
            .map(Function)
            .map_err(|e| error(&format!("finding kernel `{name}` in geeps' PTX"), e))
    }

    /// # Safety
    /// No function of the module is used or running afterwards.
    pub(crate) unsafe fn unload(self) -> Result<()> {
        check(sys::cuModuleUnload(self.0), "unloading geeps' kernels")
    }
}

/// Enqueues `function` on `stream`.
///
/// # Safety
/// `args` points at one value per kernel parameter, of the parameter's type,
/// in order; the memory the kernel touches is live until it completes.
pub(crate) unsafe fn launch(
    function: Function,
    shape: LaunchShape,
    stream: Stream,
    args: &mut [*mut c_void],
) -> Result<()> {
    result::launch_kernel(function.0, (shape.grid, 1, 1), (shape.block_x, shape.block_y, 1), 0, stream.raw(), args)
        .map_err(|e| error("launching a row kernel", e))
}

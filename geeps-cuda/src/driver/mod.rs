//! The thin unsafe edge over the CUDA driver API (cudarc's `driver::result`
//! and `sys` layers). Every driver call of geeps-cuda is made in this folder;
//! each turns a `CUresult` into a `geeps_core::Error` that says what to fix.
//! Raw handles are wrapped in `Copy` newtypes that may cross threads (the
//! driver API is thread-safe). Nothing here may keep state beyond a handle,
//! or touch the driver before [`library_present`] said it can be loaded.

mod context;
mod memory;
mod module;
mod stream;

use std::ffi::c_int;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};
use geeps_core::{Error, Result};

pub(crate) use context::Context;
pub(crate) use memory::{
    host_alloc, host_free, mem_alloc, mem_free, mem_get_info, memcpy_d2d, memcpy_d2h, memcpy_h2d, memset_zero,
};
pub(crate) use module::{launch, Function, Module};
pub(crate) use stream::{Event, Stream};

/// What a failed call means for the user, where the code says more than its name.
fn hint(code: CUresult) -> &'static str {
    use CUresult::*;
    match code {
        CUDA_ERROR_OUT_OF_MEMORY => {
            "; the GPU is out of memory: lower `Config::device_memory` (or raise `CudaConfig::reserve`), or stop other processes using the GPU (nvidia-smi)"
        }
        CUDA_ERROR_NO_DEVICE => "; no CUDA GPU is visible: check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        CUDA_ERROR_STUB_LIBRARY => "; the libcuda found is the toolkit's stub: put the NVIDIA driver's libcuda.so.1 first on the library path",
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "; the NVIDIA driver is too old for geeps' kernels (PTX ISA 8.0): install a driver for CUDA 12.0 or later (525 or newer)"
        }
        CUDA_ERROR_NO_BINARY_FOR_GPU | CUDA_ERROR_INVALID_PTX => {
            "; the driver could not compile geeps' kernels for this GPU: geeps needs compute capability 7.0 or later"
        }
        CUDA_ERROR_ILLEGAL_ADDRESS | CUDA_ERROR_LAUNCH_FAILED | CUDA_ERROR_MISALIGNED_ADDRESS => {
            "; a kernel touched memory it must not: the GPU context is now unusable, restart the process (compute-sanitizer shows where)"
        }
        CUDA_ERROR_DEVICE_UNAVAILABLE => "; the GPU is in exclusive-process mode and taken by another process",
        _ => "",
    }
}

/// The error for a failed driver call `what`.
pub(crate) fn error(what: &str, e: DriverError) -> Error {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Error::Device(format!("{what}: {name} ({text}){}", hint(e.0)))
}

/// Turns a raw result into ours.
pub(crate) fn check(code: CUresult, what: &str) -> Result<()> {
    code.result().map_err(|e| error(what, e))
}

/// Whether the driver library (libcuda) can be loaded. Loading it is the
/// one thing that may not be tried blindly: cudarc panics when it cannot.
pub(crate) fn library_present() -> bool {
    // SAFETY: loads and unloads the driver library by its standard names;
    // its initialisers are the NVIDIA driver's own.
    unsafe { sys::is_culib_present() }
}

/// `cuInit`. Only after [`library_present`].
pub(crate) fn init() -> Result<()> {
    result::init().map_err(|e| error("initialising the CUDA driver (cuInit)", e))
}

/// The driver's CUDA version, e.g. 12040 for 12.4.
pub(crate) fn driver_version() -> Result<i32> {
    let mut v: c_int = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::cuDriverGetVersion(&mut v) }, "querying the driver version")?;
    Ok(v)
}

pub(crate) fn device_count() -> Result<usize> {
    let n = result::device::get_count().map_err(|e| error("counting CUDA devices", e))?;
    Ok(n.max(0) as usize)
}

/// A GPU's handle, name, compute capability and total memory.
pub(crate) struct DeviceFacts {
    pub(crate) handle: sys::CUdevice,
    pub(crate) name: String,
    pub(crate) compute_capability: (i32, i32),
    pub(crate) total_memory: usize,
}

/// Facts about GPU `ordinal` (below [`device_count`]).
pub(crate) fn device_facts(ordinal: usize) -> Result<DeviceFacts> {
    let what = |q: &str| format!("querying {q} of CUDA device {ordinal}");
    let handle = result::device::get(ordinal as c_int).map_err(|e| error(&what("the handle"), e))?;
    let name = result::device::get_name(handle).map_err(|e| error(&what("the name"), e))?;
    use sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    };
    // SAFETY: `handle` came from cuDeviceGet just above.
    let (major, minor, total_memory) = unsafe {
        (
            result::device::get_attribute(handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(|e| error(&what("the compute capability"), e))?,
            result::device::get_attribute(handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(|e| error(&what("the compute capability"), e))?,
            result::device::total_mem(handle).map_err(|e| error(&what("the memory size"), e))?,
        )
    };
    Ok(DeviceFacts { handle, name, compute_capability: (major, minor), total_memory })
}

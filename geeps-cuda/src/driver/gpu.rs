//! Loading and initialising the driver, and what it says about the GPUs:
//! version, count, each GPU's name, compute capability and memory.

use std::ffi::c_int;

use cudarc::driver::result;
use cudarc::driver::sys;
use geeps_core::Result;

use super::errors::{check, error};

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

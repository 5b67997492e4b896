//! Driver results turned into `geeps_core::Error`s that name the failed call
//! and say what to fix. Must never call the driver.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;
use geeps_core::{Error, Result};

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

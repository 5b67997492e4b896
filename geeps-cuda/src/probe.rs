//! Finding out, without risk, whether a usable GPU is there: the driver
//! library can be loaded, initialises, is recent enough for the kernels' PTX,
//! and the GPU exists and is recent enough. Every failure is an error that
//! says what to fix; a panic inside the bindings (a symbol missing from an
//! unusual libcuda) is caught and reported the same way. Must never create a
//! context or allocate.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::sys;
use geeps_core::{Error, Result};

use crate::driver;
use crate::ptx::{MIN_COMPUTE_CAPABILITY, MIN_DRIVER_VERSION};

/// What [`CudaDevice::probe`](crate::CudaDevice::probe) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaProbe {
    /// The GPU's CUDA ordinal.
    pub ordinal: usize,
    /// The GPU's name.
    pub name: String,
    /// (major, minor) compute capability.
    pub compute_capability: (i32, i32),
    /// Total memory, in bytes.
    pub total_memory: usize,
    /// The driver's CUDA version, e.g. 12040 for 12.4.
    pub driver_version: i32,
    /// GPUs visible to this process.
    pub devices: usize,
}

impl std::fmt::Display for CudaProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.compute_capability;
        write!(
            f,
            "CUDA device {} of {}: {} (compute capability {major}.{minor}, {} MiB), driver CUDA {}.{}",
            self.ordinal,
            self.devices,
            self.name,
            self.total_memory >> 20,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10
        )
    }
}

/// Probes GPU `ordinal`; also returns its handle for opening it.
pub(crate) fn probe(ordinal: usize) -> Result<(CudaProbe, sys::CUdevice)> {
    if !driver::library_present() {
        return Err(Error::Device(
            "the NVIDIA driver library (libcuda.so.1) was not found: install the NVIDIA driver, \
             or add the folder holding libcuda.so.1 to LD_LIBRARY_PATH"
                .into(),
        ));
    }
    catch_unwind(AssertUnwindSafe(|| probe_loaded(ordinal))).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown failure");
        Err(Error::Device(format!(
            "the NVIDIA driver library could not be used ({what}): install a driver for CUDA 12.0 or later"
        )))
    })
}

fn probe_loaded(ordinal: usize) -> Result<(CudaProbe, sys::CUdevice)> {
    driver::init()?;
    let driver_version = driver::driver_version()?;
    if driver_version < MIN_DRIVER_VERSION {
        return Err(Error::Device(format!(
            "the NVIDIA driver supports CUDA {}.{}; geeps' kernels need CUDA {}.{} or later: upgrade the driver",
            driver_version / 1000,
            driver_version % 1000 / 10,
            MIN_DRIVER_VERSION / 1000,
            MIN_DRIVER_VERSION % 1000 / 10
        )));
    }
    let devices = driver::device_count()?;
    if ordinal >= devices {
        return Err(Error::Device(format!(
            "CUDA device {ordinal} does not exist: {devices} visible (check CUDA_VISIBLE_DEVICES)"
        )));
    }
    let facts = driver::device_facts(ordinal)?;
    if facts.compute_capability < MIN_COMPUTE_CAPABILITY {
        let ((major, minor), (need_major, need_minor)) = (facts.compute_capability, MIN_COMPUTE_CAPABILITY);
        return Err(Error::Device(format!(
            "CUDA device {ordinal} ({}) has compute capability {major}.{minor}; geeps needs {need_major}.{need_minor} or later",
            facts.name
        )));
    }
    let probe = CudaProbe {
        ordinal,
        name: facts.name,
        compute_capability: facts.compute_capability,
        total_memory: facts.total_memory,
        driver_version,
        devices,
    };
    Ok((probe, facts.handle))
}

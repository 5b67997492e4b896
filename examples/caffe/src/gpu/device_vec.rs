//! An owned device array for callers outside the worker (tests, benches,
//! tools): allocated on the GPU's context, freed on drop. Layers never use
//! it (their blobs are geeps buffers); it must never outlive its `Gpu`.

use cudarc::driver::result;

use super::{DevSlice, Gpu};
use crate::error::{Error, Result};

/// `len` floats of device memory, zeroed, freed on drop.
pub struct DeviceVec<'g> {
    gpu: &'g Gpu,
    slice: DevSlice,
}

impl Gpu {
    /// A zeroed device array of `floats` floats.
    pub fn alloc(&self, floats: usize) -> Result<DeviceVec<'_>> {
        self.bind()?;
        // SAFETY: a plain allocation of at least one byte, freed on drop.
        let ptr = unsafe { result::malloc_sync(floats.max(1) * 4) }
            .map_err(|e| Error::Gpu(format!("{floats} floats of device memory: {e}")))?;
        let v = DeviceVec { gpu: self, slice: DevSlice::new(ptr, floats) };
        self.zero(v.slice)?;
        Ok(v)
    }

    /// A device copy of `data`.
    pub fn alloc_from(&self, data: &[f32]) -> Result<DeviceVec<'_>> {
        let v = self.alloc(data.len())?;
        self.upload(data, v.slice)?;
        Ok(v)
    }
}

impl DeviceVec<'_> {
    pub fn slice(&self) -> DevSlice {
        self.slice
    }

    /// The contents, after everything queued on the GPU's stream.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.gpu.download(self.slice)
    }
}

impl Drop for DeviceVec<'_> {
    fn drop(&mut self) {
        // Queued kernels may still use it; a failure leaves it to the context's teardown.
        if self.gpu.sync().is_ok() && self.gpu.bind().is_ok() {
            // SAFETY: allocated by `Gpu::alloc`; the stream is idle.
            let _ = unsafe { result::free_sync(self.slice.ptr) };
        }
    }
}

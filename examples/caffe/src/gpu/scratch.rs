//! Device scratch of the layer compute (im2col columns, per-sample losses):
//! one allocation, grown on demand and kept, outside geeps' budget as
//! Caffe's column buffers are. Must never shrink or free memory a queued
//! kernel may still use (the owner synchronises before growing).

use cudarc::driver::{result, CudaStream};

use super::DevSlice;
use crate::error::{Error, Result};

#[derive(Default)]
pub struct Scratch {
    ptr: u64,
    floats: usize,
}

impl Scratch {
    /// At least `floats` floats; grows (after the stream is idle) when smaller.
    pub fn at_least(&mut self, stream: &CudaStream, floats: usize) -> Result<DevSlice> {
        if floats > self.floats {
            stream.synchronize().map_err(|e| Error::Gpu(format!("before growing scratch: {e}")))?;
            self.release();
            let want = floats.next_power_of_two().max(1 << 16);
            stream.context().bind_to_thread().map_err(|e| Error::Gpu(format!("binding the GPU context: {e}")))?;
            // SAFETY: a plain allocation, freed in `release`.
            let ptr = unsafe { result::malloc_sync(want * 4) }
                .map_err(|e| Error::Gpu(format!("{} MiB of GPU scratch for the layers: {e}", (want * 4) >> 20)))?;
            self.ptr = ptr;
            self.floats = want;
        }
        Ok(DevSlice { ptr: self.ptr, len: floats })
    }

    fn release(&mut self) {
        if self.floats > 0 {
            // SAFETY: allocated by `at_least`; the stream is idle.
            let _ = unsafe { result::free_sync(self.ptr) };
            self.ptr = 0;
            self.floats = 0;
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.release();
    }
}

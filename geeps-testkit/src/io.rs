//! Buffer contents moved through a device's own copies, on one stream of its
//! own, complete on return: the way a test looks into a buffer that may live
//! in GPU memory. Never reads a device pointer as a host address.

use std::sync::Arc;

use geeps_core::device::{Device, DevicePtr, StreamId};

/// Reads and writes device buffers through one stream of their device.
pub struct Io {
    dev: Arc<dyn Device>,
    stream: StreamId,
}

impl Io {
    /// An I/O helper on a fresh stream of `dev`.
    pub fn new(dev: &Arc<dyn Device>) -> Io {
        Io { dev: dev.clone(), stream: dev.create_stream().expect("creating a test stream") }
    }

    /// A copy of `len` floats at `ptr`.
    pub fn get(&self, ptr: DevicePtr, len: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; len];
        // SAFETY: `ptr` is a buffer the test holds, `len` floats long.
        unsafe { self.dev.copy_d2h(self.stream, ptr, out.as_mut_ptr(), len).expect("copying a buffer to the host") };
        self.dev.synchronize(self.stream).expect("waiting for the copy");
        out
    }

    /// Writes `data` at `ptr`, complete on return.
    pub fn set(&self, ptr: DevicePtr, data: &[f32]) {
        // SAFETY: as in `get`.
        unsafe { self.dev.copy_h2d(self.stream, data.as_ptr(), ptr, data.len()).expect("copying into a buffer") };
        self.dev.synchronize(self.stream).expect("waiting for the copy");
    }

    /// Sets `len` floats at `ptr` to `value`.
    pub fn fill(&self, ptr: DevicePtr, len: usize, value: f32) {
        self.set(ptr, &vec![value; len]);
    }
}

//! The devices the semantic suite runs on, and buffer I/O that works on all
//! of them. The host device is always there (it is the reference); a CUDA GPU
//! joins when the probe finds one, and is skipped with the probe's reason
//! otherwise. Buffer contents move through the `Device` trait's own copies,
//! since a GPU buffer cannot be read as a host slice.

#![allow(dead_code)]

use std::sync::Arc;

use geeps_core::device::{Device, DevicePtr, StreamId};
use geeps_core::HostDevice;
use geeps_cuda::{CudaConfig, CudaDevice};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Host,
    Cuda,
}

impl Backend {
    /// A fresh device of this kind allowing `capacity` bytes.
    pub fn device(self, capacity: usize) -> Arc<dyn Device> {
        match self {
            Backend::Host => Arc::new(HostDevice::new(capacity)),
            Backend::Cuda => Arc::new(
                CudaDevice::new(CudaConfig { budget: Some(capacity), ..CudaConfig::ordinal(0) })
                    .expect("the probe found a GPU, so it opens"),
            ),
        }
    }
}

/// The host device, plus the GPU when there is one.
pub fn backends(test: &str) -> Vec<Backend> {
    match CudaDevice::probe(0) {
        Ok(probe) => {
            eprintln!("{test}: running on the host device and on {probe}");
            vec![Backend::Host, Backend::Cuda]
        }
        Err(e) => {
            eprintln!("{test}: CUDA variant skipped: no CUDA device ({e})");
            vec![Backend::Host]
        }
    }
}

/// Reads and writes device buffers through one stream of their device.
pub struct Io {
    dev: Arc<dyn Device>,
    stream: StreamId,
}

impl Io {
    pub fn new(dev: &Arc<dyn Device>) -> Io {
        Io { dev: dev.clone(), stream: dev.create_stream().unwrap() }
    }

    /// A copy of `len` floats at `ptr`.
    pub fn get(&self, ptr: DevicePtr, len: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; len];
        // SAFETY: `ptr` is a buffer the test holds, `len` floats long.
        unsafe { self.dev.copy_d2h(self.stream, ptr, out.as_mut_ptr(), len).unwrap() };
        self.dev.synchronize(self.stream).unwrap();
        out
    }

    /// Writes `data` at `ptr`, complete on return.
    pub fn set(&self, ptr: DevicePtr, data: &[f32]) {
        // SAFETY: as in `get`.
        unsafe { self.dev.copy_h2d(self.stream, data.as_ptr(), ptr, data.len()).unwrap() };
        self.dev.synchronize(self.stream).unwrap();
    }

    pub fn fill(&self, ptr: DevicePtr, len: usize, value: f32) {
        self.set(ptr, &vec![value; len]);
    }
}

//! One device of a backend with the means to look into its buffers: what a
//! device-parametrised test holds instead of host slices. A buffer of a GPU
//! is not a host slice, so every read and write of a buffer's contents goes
//! through the device's own copies ([`Io`]), on the host device as well, so
//! that both run the very same test code.

use std::sync::Arc;

use geeps_core::device::{Device, DevicePtr};
use geeps_core::{Config, Geeps, GeepsBuilder, LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};

use crate::{Backend, Io};

/// A buffer an instance handed out: where it starts in device memory and how
/// many floats it holds.
pub trait DeviceBuffer {
    /// Start of the buffer in device memory.
    fn device_ptr(&self) -> DevicePtr;
    /// Length in floats.
    fn floats(&self) -> usize;
}

macro_rules! device_buffer {
    ($($t:ty),*) => {
        $(impl DeviceBuffer for $t {
            fn device_ptr(&self) -> DevicePtr {
                <$t>::device_ptr(self)
            }
            fn floats(&self) -> usize {
                <$t>::len(self)
            }
        })*
    };
}

device_buffer!(ReadBuffer<'_>, UpdateBuffer<'_>, LocalBuffer<'_>);

impl DeviceBuffer for RawBuffer {
    fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }
    fn floats(&self) -> usize {
        self.floats
    }
}

/// A device of one backend, and buffer I/O through it.
pub struct Fixture {
    backend: Backend,
    device: Arc<dyn Device>,
    io: Io,
}

impl Fixture {
    /// A fresh device of `backend` allowing `capacity` bytes.
    pub fn new(backend: Backend, capacity: usize) -> Fixture {
        Fixture::wrapping(backend, backend.device(capacity))
    }

    /// A fixture on `device`, a device of `backend` or a wrapper around one
    /// (a test device that gates or counts calls).
    pub fn wrapping(backend: Backend, device: Arc<dyn Device>) -> Fixture {
        let io = Io::new(&device);
        Fixture { backend, device, io }
    }

    /// The backend the device is of.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The device, to hand to a builder.
    pub fn device(&self) -> Arc<dyn Device> {
        self.device.clone()
    }

    /// A builder for an instance on this fixture's device.
    pub fn builder(&self, config: Config) -> GeepsBuilder {
        let mut b = Geeps::builder(config);
        b.device(self.device.clone());
        b
    }

    /// A copy of `buf`'s contents.
    pub fn get(&self, buf: &impl DeviceBuffer) -> Vec<f32> {
        self.io.get(buf.device_ptr(), buf.floats())
    }

    /// Writes `data` into `buf`, which it must fill exactly.
    ///
    /// # Panics
    /// When `data` is not as long as the buffer.
    pub fn set(&self, buf: &impl DeviceBuffer, data: &[f32]) {
        assert_eq!(data.len(), buf.floats(), "the data must fill the buffer exactly");
        self.io.set(buf.device_ptr(), data);
    }

    /// Sets every float of `buf` to `value`.
    pub fn fill(&self, buf: &impl DeviceBuffer, value: f32) {
        self.io.fill(buf.device_ptr(), buf.floats(), value);
    }

    /// Reads `buf`, lets `f` change the copy and writes it back.
    pub fn modify(&self, buf: &impl DeviceBuffer, f: impl FnOnce(&mut [f32])) {
        let mut v = self.get(buf);
        f(&mut v);
        self.set(buf, &v);
    }
}

impl Backend {
    /// A [`Fixture`] on a fresh device of this kind allowing `capacity` bytes.
    pub fn fixture(self, capacity: usize) -> Fixture {
        Fixture::new(self, capacity)
    }

    /// A builder for `config` on a fresh device of this kind sized by
    /// `config.device_memory`, and the fixture to look into its buffers.
    pub fn builder(self, config: Config) -> (GeepsBuilder, Fixture) {
        let fx = Fixture::new(self, config.device_memory);
        (fx.builder(config), fx)
    }
}

/// Asserts that `got` (a CUDA run's numbers) equals `want` (the host
/// device's) bit for bit: same length, same f32 bits at every index (so
/// `-0.0` differs from `0.0`, and a NaN must carry the same payload).
///
/// # Panics
/// At the first difference, naming the index and both values.
pub fn assert_same_bits(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {} numbers, the host device gave {}", got.len(), want.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{what}: number {i} of {} is {:e} ({:#010x}), the host device gave {:e} ({:#010x})",
            got.len(),
            got[i],
            got[i].to_bits(),
            want[i],
            want[i].to_bits()
        );
    }
}

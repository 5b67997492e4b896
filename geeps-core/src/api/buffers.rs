//! The buffers the application holds, as RAII guards. Dropping a read buffer
//! is `post_read`; an update buffer must be consumed by `update` (dropping it
//! discards its deltas); a local buffer is saved on drop as recorded. Guards
//! borrow the instance, so no buffer outlives it.

use crate::api::instance::Geeps;
use crate::api::release::ReleaseAs;
use crate::device::DevicePtr;
use crate::error::{Error, Result};

/// A buffer handed across a language boundary: its ticket releases it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBuffer {
    /// Names the buffer in [`Geeps::release_raw`]; never reused by an instance.
    pub ticket: u64,
    /// Start of the buffer in device memory.
    pub ptr: DevicePtr,
    /// Length in floats (rows × row width).
    pub floats: usize,
}

fn host_slice<'b>(ps: &Geeps, raw: &RawBuffer) -> Result<&'b [f32]> {
    if !ps.host_addressable() {
        return Err(Error::Device("this buffer lives in GPU memory; pass device_ptr() to your kernels".into()));
    }
    // SAFETY: the buffer is held by this guard alone until it is released,
    // and its memory lives as long as the instance the guard borrows.
    Ok(unsafe { std::slice::from_raw_parts(raw.ptr.0 as *const f32, raw.floats) })
}

fn host_slice_mut<'b>(ps: &Geeps, raw: &RawBuffer) -> Result<&'b mut [f32]> {
    if !ps.host_addressable() {
        return Err(Error::Device("this buffer lives in GPU memory; pass device_ptr() to your kernels".into()));
    }
    // SAFETY: as in `host_slice`; `&mut self` of the guard gives exclusivity.
    Ok(unsafe { std::slice::from_raw_parts_mut(raw.ptr.0 as *mut f32, raw.floats) })
}

macro_rules! common_accessors {
    () => {
        /// Start of the buffer in device memory.
        pub fn device_ptr(&self) -> DevicePtr {
            self.raw.ptr
        }

        /// Length in floats (rows × row width).
        pub fn len(&self) -> usize {
            self.raw.floats
        }

        /// Whether the buffer holds no floats (an access of no keys).
        pub fn is_empty(&self) -> bool {
            self.raw.floats == 0
        }

        /// Rows in the buffer, in the order of the access's keys.
        pub fn rows(&self) -> usize {
            self.raw.floats / self.ps.row_width()
        }

        /// The buffer's contents, when device memory is host memory.
        pub fn as_slice(&self) -> Result<&[f32]> {
            host_slice(self.ps, &self.raw)
        }

        /// Gives up the guard; the buffer must then be released with
        /// [`Geeps::release_raw`].
        pub fn into_raw(self) -> RawBuffer {
            let raw = self.raw;
            std::mem::forget(self);
            raw
        }
    };
}

/// Rows returned by `read`; dropping it is `post_read`.
///
/// Every buffer is a guard that borrows the instance: released exactly once,
/// by its method or on drop, and never outliving the instance.
///
/// ```
/// use geeps_core::{keys, Config, Geeps, Slack};
///
/// let mut b = Geeps::builder(Config::default().with_row_width(4).with_device_memory(1 << 20));
/// let w = b.parameter_table("w", 2);
/// let act = b.local_table("act", 1);
/// let ps = b.build()?;
/// ps.finish_virtual_iteration()?;
/// {
///     let params = ps.read_keys(&keys(w, 0..2), Slack::BSP)?;
///     assert_eq!(params.rows(), 2);
///     assert_eq!(params.as_slice()?, &[0.0; 8]);
/// } // dropped: post_read
/// let mut delta = ps.pre_update_keys(&keys(w, 0..2))?;
/// delta.as_mut_slice()?.fill(0.5);
/// delta.update()?; // consumed: params += delta
/// let mut local = ps.local_access_keys(&keys(act, 0..1), true)?;
/// local.as_mut_slice()?.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
/// local.post()?; // stored; the next access sees it
/// assert_eq!(ps.local_access_keys(&keys(act, 0..1), true)?.as_slice()?, &[1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), geeps_core::Error>(())
/// ```
pub struct ReadBuffer<'a> {
    pub(crate) ps: &'a Geeps,
    pub(crate) raw: RawBuffer,
}

impl ReadBuffer<'_> {
    common_accessors!();

    /// `post_read`: returns the buffer.
    pub fn post(self) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::PostRead)
    }
}

impl Drop for ReadBuffer<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.ps.release_raw(self.raw.ticket, ReleaseAs::PostRead) {
            self.ps.drop_failed("post_read", e);
        }
    }
}

/// A zeroed buffer from `pre_update`; fill it with deltas and call `update`.
/// Dropping it without `update` discards the deltas.
pub struct UpdateBuffer<'a> {
    pub(crate) ps: &'a Geeps,
    pub(crate) raw: RawBuffer,
}

impl UpdateBuffer<'_> {
    common_accessors!();

    /// The deltas, when device memory is host memory.
    pub fn as_mut_slice(&mut self) -> Result<&mut [f32]> {
        host_slice_mut(self.ps, &self.raw)
    }

    /// `update`: adds the deltas to the parameters and returns the buffer.
    pub fn update(self) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::Update)
    }

    /// Returns the buffer without applying anything.
    pub fn discard(self) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::Discard)
    }
}

impl Drop for UpdateBuffer<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.ps.release_raw(self.raw.ticket, ReleaseAs::Discard) {
            self.ps.drop_failed("discarding an update buffer", e);
        }
    }
}

/// Local rows from `local_access`; dropping it is `post_local_access` with
/// the recorded `save` flag (true for keyed accesses).
pub struct LocalBuffer<'a> {
    pub(crate) ps: &'a Geeps,
    pub(crate) raw: RawBuffer,
}

impl LocalBuffer<'_> {
    common_accessors!();

    /// The rows, writable, when device memory is host memory.
    pub fn as_mut_slice(&mut self) -> Result<&mut [f32]> {
        host_slice_mut(self.ps, &self.raw)
    }

    /// `post_local_access` with the recorded `save` flag.
    pub fn post(self) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::PostLocal { save: None })
    }

    /// `post_local_access` declaring the rows' contents dead until they are
    /// written again (a blob's diff after its last backward read, say):
    /// nothing is saved, not even what the previous access of these rows
    /// posted with `save = true` and handed over with the buffer. Record it
    /// with [`crate::Geeps::virtual_discard_local_access`].
    pub fn discard(self) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::DiscardLocal)
    }

    /// `post_local_access` with an explicit `save` flag (`false`: the
    /// application's changes need not be stored; they may still be).
    pub fn post_with(self, save: bool) -> Result<()> {
        let (ps, raw) = (self.ps, self.into_raw());
        ps.release_raw(raw.ticket, ReleaseAs::PostLocal { save: Some(save) })
    }
}

impl Drop for LocalBuffer<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.ps.release_raw(self.raw.ticket, ReleaseAs::PostLocal { save: None }) {
            self.ps.drop_failed("post_local_access", e);
        }
    }
}

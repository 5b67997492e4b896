//! geeps buffers as host slices, whatever device holds them, for layers that
//! compute on the CPU. On the host device a view borrows the buffer in place
//! (no copy); on a GPU it is staged through the device's own copies on a
//! stream of the worker's: read before the layer runs, written back before
//! the buffer is posted. Never touches a device pointer as a host address,
//! and never posts a buffer itself.

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use geeps::device::{Device, DevicePtr, StreamId};

use crate::error::Result;

/// How the worker reaches its buffers' contents.
pub enum HostView {
    /// Device memory is host memory: slices in place.
    InPlace,
    /// A GPU: copies through `stream`, complete when each call returns.
    Staged { device: Arc<dyn Device>, stream: StreamId },
}

/// A buffer's contents the layer may write; [`HostView::commit`] puts them back.
pub enum Writable<'b> {
    /// The buffer itself.
    InPlace(&'b mut [f32]),
    /// A host copy of the buffer at `ptr`.
    Staged { data: Vec<f32>, ptr: DevicePtr },
}

impl Deref for Writable<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            Writable::InPlace(s) => s,
            Writable::Staged { data, .. } => data,
        }
    }
}

impl DerefMut for Writable<'_> {
    fn deref_mut(&mut self) -> &mut [f32] {
        match self {
            Writable::InPlace(s) => s,
            Writable::Staged { data, .. } => data,
        }
    }
}

impl HostView {
    /// Views for buffers of `device` (`None`: the host device).
    pub fn new(device: Option<Arc<dyn Device>>) -> Result<HostView> {
        Ok(match device {
            Some(device) if !device.info().host_addressable => {
                let stream = device.create_stream()?;
                HostView::Staged { device, stream }
            }
            _ => HostView::InPlace,
        })
    }

    fn download(device: &Arc<dyn Device>, stream: StreamId, ptr: DevicePtr, len: usize) -> Result<Vec<f32>> {
        let mut out = vec![0.0f32; len];
        // SAFETY: `ptr` is a buffer the worker holds, `len` floats long; the
        // copy completes before `out` is returned.
        unsafe { device.copy_d2h(stream, ptr, out.as_mut_ptr(), len)? };
        device.synchronize(stream)?;
        Ok(out)
    }

    /// The contents of a buffer at `ptr` of `len` floats; `in_place` gives
    /// the host slice when device memory is host memory.
    pub fn read<'b>(
        &self,
        ptr: DevicePtr,
        len: usize,
        in_place: impl FnOnce() -> geeps::Result<&'b [f32]>,
    ) -> Result<Cow<'b, [f32]>> {
        match self {
            HostView::InPlace => Ok(Cow::Borrowed(in_place()?)),
            HostView::Staged { device, stream } => Ok(Cow::Owned(Self::download(device, *stream, ptr, len)?)),
        }
    }

    /// A writable view; `fetch = false` skips reading what the layer
    /// overwrites whole (its staged copy starts zeroed).
    pub fn write<'b>(
        &self,
        ptr: DevicePtr,
        len: usize,
        fetch: bool,
        in_place: impl FnOnce() -> geeps::Result<&'b mut [f32]>,
    ) -> Result<Writable<'b>> {
        match self {
            HostView::InPlace => Ok(Writable::InPlace(in_place()?)),
            HostView::Staged { device, stream } => {
                let data = if fetch { Self::download(device, *stream, ptr, len)? } else { vec![0.0; len] };
                Ok(Writable::Staged { data, ptr })
            }
        }
    }

    /// Puts a writable view's contents back into its buffer.
    pub fn commit(&self, view: Writable<'_>) -> Result<()> {
        if let (HostView::Staged { device, stream }, Writable::Staged { data, ptr }) = (self, &view) {
            // SAFETY: `ptr` is the buffer the view was made from, still held
            // by the worker, `data.len()` floats long; the copy completes
            // before `data` is dropped.
            unsafe { device.copy_h2d(*stream, data.as_ptr(), *ptr, data.len())? };
            device.synchronize(*stream)?;
        }
        Ok(())
    }
}

//! The seam between the engine and the hardware, shaped for an asynchronous
//! GPU: device allocations, page-locked host staging, copies and kernels
//! enqueued on streams, and events to order them.
//!
//! This is the thin unsafe edge of geeps: methods that touch memory take raw
//! device addresses and are `unsafe`; the engine above owns every address it
//! passes and guarantees the ranges are live and not used concurrently. This
//! module must never hold engine state or know which backend it talks to.

mod capacity;
pub(crate) mod host;

pub use capacity::CapacityMeter;
pub use host::HostDevice;

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::error::Result;

/// An address in device memory, pointing at `f32` data.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `floats` values further on.
    pub fn add_floats(self, floats: usize) -> DevicePtr {
        DevicePtr(self.0 + (floats * std::mem::size_of::<f32>()) as u64)
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.0)
    }
}

/// A queue of device work that runs in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamId(pub u32);

/// A marker recorded on a stream; completes when the work before it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId(pub u64);

/// A gather/scatter index resident on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexId(pub u64);

/// One entry of a row index: row `buffer_row` of an access buffer corresponds
/// to row `store_row` of a store (cache or local data region).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowPair {
    /// Row of the access buffer.
    pub buffer_row: u32,
    /// Row of the store (parameter cache or local store).
    pub store_row: u32,
}

/// What a device is and how much memory geeps may use on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// A human-readable name (the GPU's, or `host`).
    pub name: String,
    /// Bytes geeps may allocate (the budget, or the free memory less a margin).
    pub capacity: usize,
    /// True when device addresses are ordinary host pointers.
    pub host_addressable: bool,
}

/// Page-locked host memory for transfers; frees itself through its device.
pub struct PinnedBuf {
    ptr: *mut f32,
    len: usize,
    release: Option<Box<dyn FnOnce(*mut f32, usize) + Send + Sync>>,
}

// SAFETY: a PinnedBuf owns its memory exclusively, like a Box<[f32]>.
unsafe impl Send for PinnedBuf {}
unsafe impl Sync for PinnedBuf {}

impl PinnedBuf {
    /// Wraps memory of `len` floats at `ptr`, released by `release`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` initialised floats
    /// until `release` runs, and owned by nothing else.
    pub unsafe fn from_raw(ptr: *mut f32, len: usize, release: Box<dyn FnOnce(*mut f32, usize) + Send + Sync>) -> Self {
        PinnedBuf { ptr, len, release: Some(release) }
    }

    /// Ordinary host memory standing in for page-locked memory.
    pub fn zeroed_host(len: usize) -> Self {
        let boxed: Box<[f32]> = vec![0.0f32; len].into_boxed_slice();
        let ptr = Box::into_raw(boxed) as *mut f32;
        PinnedBuf {
            ptr,
            len,
            // SAFETY: rebuilds the Box leaked just above, once.
            release: Some(Box::new(|p, n| unsafe {
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)));
            })),
        }
    }

    /// The first float.
    pub fn as_ptr(&self) -> *const f32 {
        self.ptr
    }

    /// The first float, writable.
    pub fn as_mut_ptr(&mut self) -> *mut f32 {
        self.ptr
    }
}

impl Deref for PinnedBuf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: from_raw's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for PinnedBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: from_raw's contract; &mut self gives exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release(self.ptr, self.len);
        }
    }
}

impl fmt::Debug for PinnedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PinnedBuf({} floats)", self.len)
    }
}

/// A row kernel: how [`Device::rows`] moves rows between a store (cache,
/// local store) and an access buffer, pair by pair of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOp {
    /// `buffer[buffer_row] = store[store_row]`
    Gather,
    /// `store[store_row] = buffer[buffer_row]`
    ScatterAssign,
    /// `store[store_row] += buffer[buffer_row]`
    ScatterAdd,
}

/// A device geeps can keep rows on. All memory methods are asynchronous with
/// respect to the host: work is enqueued on a stream and is complete only once
/// an event recorded after it (or the stream) has been synchronised.
///
/// Scatter kernels require that no `store_row` repeats within one index; the
/// engine guarantees this when it builds the index, so no atomics are needed.
pub trait Device: Send + Sync + 'static {
    /// What the device is and how much it holds.
    fn info(&self) -> DeviceInfo;
    /// Bytes currently allocated through [`Device::alloc`].
    fn used_bytes(&self) -> usize;
    /// Allocates `floats` zeroed floats within the capacity.
    fn alloc(&self, floats: usize) -> Result<DevicePtr>;
    /// Allocates `floats` floats within the capacity whose contents are
    /// unspecified (access buffers, always filled before use).
    fn alloc_scratch(&self, floats: usize) -> Result<DevicePtr> {
        self.alloc(floats)
    }
    /// # Safety
    /// `ptr` came from `alloc` on this device, no enqueued work uses it, and it
    /// is never used again.
    unsafe fn free(&self, ptr: DevicePtr);
    /// Page-locked host memory of `floats` floats (zeroed).
    fn alloc_pinned(&self, floats: usize) -> Result<PinnedBuf>;
    /// A new stream: work enqueued on it runs in order, concurrently with other streams.
    fn create_stream(&self) -> Result<StreamId>;
    /// Copies an index to the device. Indexes do not count against capacity.
    fn upload_index(&self, pairs: &[RowPair]) -> Result<IndexId>;
    /// Frees an index from [`Device::upload_index`] once no enqueued work uses it.
    fn free_index(&self, index: IndexId);

    /// # Safety
    /// `src` is valid for `floats` reads until the copy completes; `dst` is a
    /// live device range of `floats` floats.
    unsafe fn copy_h2d(&self, stream: StreamId, src: *const f32, dst: DevicePtr, floats: usize) -> Result<()>;
    /// # Safety
    /// `src` is a live device range; `dst` is valid for `floats` writes until
    /// the copy completes.
    unsafe fn copy_d2h(&self, stream: StreamId, src: DevicePtr, dst: *mut f32, floats: usize) -> Result<()>;
    /// # Safety
    /// Both are live, non-overlapping device ranges of `floats` floats.
    unsafe fn copy_d2d(&self, stream: StreamId, src: DevicePtr, dst: DevicePtr, floats: usize) -> Result<()>;
    /// # Safety
    /// `dst` is a live device range of `floats` floats.
    unsafe fn fill_zero(&self, stream: StreamId, dst: DevicePtr, floats: usize) -> Result<()>;
    /// Runs the row kernel `op` over every pair of `index`, between rows of
    /// `row_width` floats at `store` and at `buffer` (see [`RowOp`] for which
    /// way each copies).
    ///
    /// # Safety
    /// Every row named by the index lies inside the live ranges at `store` and
    /// `buffer`, each `row_width` floats wide.
    unsafe fn rows(
        &self,
        stream: StreamId,
        op: RowOp,
        store: DevicePtr,
        index: IndexId,
        buffer: DevicePtr,
        row_width: usize,
    ) -> Result<()>;

    /// Records an event at the current end of `stream`'s work.
    fn record_event(&self, stream: StreamId) -> Result<EventId>;
    /// Makes later work on `stream` wait for `event`, without blocking the host.
    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()>;
    /// Blocks the host until `event` completes, then releases it.
    fn synchronize_event(&self, event: EventId) -> Result<()>;
    /// Blocks the host until all work on `stream` completes.
    fn synchronize(&self, stream: StreamId) -> Result<()>;
}

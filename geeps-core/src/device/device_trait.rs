//! The `Device` trait and what a device reports about itself: the methods
//! the engine calls to allocate, copy and run row kernels. It must never
//! hold engine state or know which backend implements it.

use crate::device::handles::{DevicePtr, EventId, IndexId, RowOp, RowPair, StreamId};
use crate::device::pinned::PinnedBuf;
use crate::error::Result;

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

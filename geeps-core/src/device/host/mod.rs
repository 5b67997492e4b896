//! The host device: "device memory" is host memory with an enforced capacity,
//! so the planner, the buffer pool and swapping run and are measured without a
//! GPU. Work runs eagerly on the calling thread (streams and events are
//! therefore trivially complete); kernels are parallel loops.

mod kernels;
mod memory;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::device::capacity::CapacityMeter;
use crate::device::device_trait::{Device, DeviceInfo};
use crate::device::handles::{DevicePtr, EventId, IndexId, RowOp, RowPair, StreamId};
use crate::device::pinned::PinnedBuf;
use crate::error::{Error, Result};

pub(crate) use kernels::run as run_row_kernel;

/// Freed regions the host device keeps, in capacities, and at most in bytes:
/// enough for the buffer pool to trade every size of an iteration for
/// another without going back to the operating system.
const SPARE_CAPACITIES: usize = 4;
const SPARE_LIMIT: usize = 1 << 30;

/// A [`Device`] backed by host memory, limited to `capacity` bytes.
pub struct HostDevice {
    meter: CapacityMeter,
    /// Freed regions kept for reuse (see `memory.rs`).
    spares: memory::Spares,
    allocations: Mutex<HashMap<u64, usize>>,
    indexes: Mutex<HashMap<u64, Arc<[RowPair]>>>,
    next_index: AtomicU64,
    next_stream: AtomicU32,
    next_event: AtomicU64,
}

impl HostDevice {
    /// A host device that allows `capacity` bytes of allocations.
    pub fn new(capacity: usize) -> Self {
        HostDevice {
            meter: CapacityMeter::new(capacity),
            spares: memory::Spares::new(capacity.saturating_mul(SPARE_CAPACITIES).min(SPARE_LIMIT)),
            allocations: Mutex::new(HashMap::new()),
            indexes: Mutex::new(HashMap::new()),
            next_index: AtomicU64::new(1),
            next_stream: AtomicU32::new(0),
            next_event: AtomicU64::new(1),
        }
    }

    /// Allocates within the capacity, reusing a kept region when one fits
    /// exactly; `zeroed = false` leaves a reused region's stale contents.
    fn alloc_region(&self, floats: usize, zeroed: bool) -> Result<DevicePtr> {
        let bytes = floats * 4;
        self.meter.charge(bytes)?;
        let reused = self.spares.take(floats);
        if let (Some(ptr), true) = (reused, zeroed) {
            // SAFETY: a kept region of exactly `floats` floats, owned by nobody.
            unsafe { std::ptr::write_bytes(ptr, 0, floats) };
        }
        let Some(ptr) = reused.or_else(|| memory::alloc_zeroed(floats)) else {
            self.meter.release(bytes);
            return Err(Error::Device(format!("host allocation of {bytes} bytes failed")));
        };
        self.allocations.lock().insert(ptr as u64, floats);
        Ok(DevicePtr(ptr as u64))
    }

    fn with_index<R>(&self, index: IndexId, f: impl FnOnce(&[RowPair]) -> R) -> Result<R> {
        // Clone the Arc out so concurrent kernels never serialise on the map.
        let pairs = self
            .indexes
            .lock()
            .get(&index.0)
            .cloned()
            .ok_or_else(|| Error::Device(format!("index {} is not loaded on the host device", index.0)))?;
        Ok(f(&pairs))
    }

    fn row_kernel(&self, op: RowOp, store: DevicePtr, index: IndexId, buffer: DevicePtr, width: usize) -> Result<()> {
        self.with_index(index, |pairs| {
            // SAFETY: the Device contract makes the caller vouch for the rows.
            unsafe { kernels::run(op, pairs, store.0 as *mut f32, buffer.0 as *mut f32, width) }
        })
    }
}

impl Device for HostDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { name: "host".into(), capacity: self.meter.capacity(), host_addressable: true }
    }

    fn used_bytes(&self) -> usize {
        self.meter.used()
    }

    fn alloc(&self, floats: usize) -> Result<DevicePtr> {
        self.alloc_region(floats, true)
    }

    fn alloc_scratch(&self, floats: usize) -> Result<DevicePtr> {
        self.alloc_region(floats, false)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        if let Some(floats) = self.allocations.lock().remove(&ptr.0) {
            if !self.spares.keep(ptr.0 as *mut f32, floats) {
                memory::free(ptr.0 as *mut f32, floats);
            }
            self.meter.release(floats * 4);
        } else {
            tracing::error!(?ptr, "free of an address the host device did not allocate; ignored");
        }
    }

    fn alloc_pinned(&self, floats: usize) -> Result<PinnedBuf> {
        Ok(PinnedBuf::zeroed_host(floats))
    }

    fn create_stream(&self) -> Result<StreamId> {
        Ok(StreamId(self.next_stream.fetch_add(1, Ordering::Relaxed)))
    }

    fn upload_index(&self, pairs: &[RowPair]) -> Result<IndexId> {
        let id = self.next_index.fetch_add(1, Ordering::Relaxed);
        self.indexes.lock().insert(id, Arc::from(pairs));
        Ok(IndexId(id))
    }

    fn free_index(&self, index: IndexId) {
        self.indexes.lock().remove(&index.0);
    }

    unsafe fn copy_h2d(&self, _: StreamId, src: *const f32, dst: DevicePtr, floats: usize) -> Result<()> {
        kernels::copy(src, dst.0 as *mut f32, floats);
        Ok(())
    }

    unsafe fn copy_d2h(&self, _: StreamId, src: DevicePtr, dst: *mut f32, floats: usize) -> Result<()> {
        kernels::copy(src.0 as *const f32, dst, floats);
        Ok(())
    }

    unsafe fn copy_d2d(&self, _: StreamId, src: DevicePtr, dst: DevicePtr, floats: usize) -> Result<()> {
        kernels::copy(src.0 as *const f32, dst.0 as *mut f32, floats);
        Ok(())
    }

    unsafe fn fill_zero(&self, _: StreamId, dst: DevicePtr, floats: usize) -> Result<()> {
        std::ptr::write_bytes(dst.0 as *mut f32, 0, floats);
        Ok(())
    }

    unsafe fn rows(
        &self,
        _: StreamId,
        op: RowOp,
        store: DevicePtr,
        index: IndexId,
        buffer: DevicePtr,
        width: usize,
    ) -> Result<()> {
        self.row_kernel(op, store, index, buffer, width)
    }

    fn record_event(&self, _: StreamId) -> Result<EventId> {
        Ok(EventId(self.next_event.fetch_add(1, Ordering::Relaxed)))
    }

    fn stream_wait_event(&self, _: StreamId, _: EventId) -> Result<()> {
        Ok(())
    }

    fn synchronize_event(&self, _: EventId) -> Result<()> {
        Ok(())
    }

    fn synchronize(&self, _: StreamId) -> Result<()> {
        Ok(())
    }
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        for (ptr, floats) in self.spares.drain() {
            // SAFETY: kept regions are owned by nobody.
            unsafe { memory::free(ptr, floats) };
        }
        for (addr, floats) in self.allocations.get_mut().drain() {
            // SAFETY: the device is going away; nothing can use its memory now.
            unsafe { memory::free(addr as *mut f32, floats) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_enforced_and_freed() {
        let dev = HostDevice::new(1000);
        let a = dev.alloc(200).unwrap();
        assert_eq!(dev.used_bytes(), 800);
        match dev.alloc(51) {
            Err(Error::DeviceOutOfMemory { requested: 204, available: 200, capacity: 1000 }) => {}
            other => panic!("{other:?}"),
        }
        unsafe { dev.free(a) };
        assert_eq!(dev.used_bytes(), 0);
        dev.alloc(250).unwrap();
    }

    #[test]
    fn freed_regions_are_reused_zeroed_by_alloc_and_within_capacity() {
        let dev = HostDevice::new(1000);
        let a = dev.alloc(100).unwrap();
        // SAFETY: 100 floats just allocated.
        unsafe { std::slice::from_raw_parts_mut(a.0 as *mut f32, 100).fill(7.0) };
        unsafe { dev.free(a) };
        let b = dev.alloc(100).unwrap();
        assert_eq!(b, a, "the freed region is reused");
        // SAFETY: as above.
        assert!(unsafe { std::slice::from_raw_parts(b.0 as *const f32, 100) }.iter().all(|v| *v == 0.0));
        unsafe { dev.free(b) };
        let c = dev.alloc_scratch(100).unwrap();
        assert_eq!(c, a, "scratch reuses the region too");
        // Kept regions never count against the capacity.
        unsafe { dev.free(c) };
        assert_eq!(dev.used_bytes(), 0);
        let d = dev.alloc(250).unwrap();
        assert_eq!(dev.used_bytes(), 1000);
        unsafe { dev.free(d) };
    }

    #[test]
    fn unknown_index_is_an_error_not_a_crash() {
        let dev = HostDevice::new(1 << 20);
        let s = dev.create_stream().unwrap();
        let p = dev.alloc(16).unwrap();
        let err = unsafe { dev.rows(s, RowOp::Gather, p, IndexId(999), p, 4) }.unwrap_err();
        assert!(matches!(err, Error::Device(_)));
    }
}

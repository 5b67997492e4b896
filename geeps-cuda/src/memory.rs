//! GPU allocations within the device's capacity, and page-locked host
//! buffers. Owns the byte count the capacity is enforced against and the
//! table of live allocations (so a dropped device frees what is left). Must
//! never free memory that enqueued work may still use: callers guarantee it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use geeps_core::device::{DevicePtr, PinnedBuf};
use geeps_core::{Error, Result};
use parking_lot::Mutex;

use crate::driver::{self, Context, Stream};

const FLOAT: usize = std::mem::size_of::<f32>();

pub(crate) struct DeviceMemory {
    capacity: usize,
    used: AtomicUsize,
    /// Address → bytes charged.
    live: Mutex<HashMap<u64, usize>>,
}

impl DeviceMemory {
    pub(crate) fn new(capacity: usize) -> Self {
        DeviceMemory { capacity, used: AtomicUsize::new(0), live: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Charges `bytes` against the capacity, or says how much is left.
    fn charge(&self, bytes: usize) -> Result<()> {
        let mut current = self.used.load(Ordering::Relaxed);
        loop {
            if current + bytes > self.capacity {
                return Err(Error::DeviceOutOfMemory {
                    requested: bytes,
                    available: self.capacity.saturating_sub(current),
                    capacity: self.capacity,
                });
            }
            match self.used.compare_exchange_weak(current, current + bytes, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(seen) => current = seen,
            }
        }
    }

    /// `floats` zeroed floats of GPU memory, cleared on `stream` (which this
    /// waits for: allocation is never on the hot path).
    pub(crate) fn alloc(&self, floats: usize, stream: Stream) -> Result<DevicePtr> {
        // At least one float, so every allocation has its own address.
        let bytes = floats.max(1).checked_mul(FLOAT).ok_or_else(|| too_large(floats))?;
        self.charge(bytes)?;
        let ptr = match driver::mem_alloc(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.used.fetch_sub(bytes, Ordering::AcqRel);
                return Err(e);
            }
        };
        self.live.lock().insert(ptr, bytes);
        // SAFETY: the range was just allocated and nothing else knows it.
        let cleared = unsafe { driver::memset_zero(stream, ptr, bytes / FLOAT) }.and_then(|()| stream.synchronize());
        if let Err(e) = cleared {
            // SAFETY: as above; the failed clear leaves no work on it.
            unsafe { self.free(DevicePtr(ptr)) };
            return Err(e);
        }
        Ok(DevicePtr(ptr))
    }

    /// # Safety
    /// `ptr` came from `alloc`, no enqueued work uses it, and it is not used again.
    pub(crate) unsafe fn free(&self, ptr: DevicePtr) {
        let Some(bytes) = self.live.lock().remove(&ptr.0) else {
            tracing::error!(?ptr, "free of an address the CUDA device did not allocate; ignored");
            return;
        };
        if let Err(e) = driver::mem_free(ptr.0) {
            tracing::error!("{e}");
        }
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Frees every live allocation.
    ///
    /// # Safety
    /// No enqueued work uses any of them, and none is used again.
    pub(crate) unsafe fn free_all(&self) {
        let live: Vec<u64> = self.live.lock().keys().copied().collect();
        for ptr in live {
            self.free(DevicePtr(ptr));
        }
    }
}

fn too_large(floats: usize) -> Error {
    Error::Device(format!("an allocation of {floats} floats overflows the address space"))
}

/// `floats` zeroed floats of page-locked host memory. The buffer keeps the
/// context alive and frees itself through it, whichever thread drops it.
pub(crate) fn alloc_pinned(ctx: &Arc<Context>, floats: usize) -> Result<PinnedBuf> {
    let bytes = floats.max(1).checked_mul(FLOAT).ok_or_else(|| too_large(floats))?;
    ctx.bind()?;
    let ptr = driver::host_alloc(bytes)? as *mut f32;
    // SAFETY: `bytes` were just allocated; zeroing makes them initialised floats.
    unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
    let owner = ctx.clone();
    let release = Box::new(move |p: *mut f32, _len: usize| {
        // SAFETY: `p` is the allocation made above, released once, by its PinnedBuf.
        let freed = owner.bind().and_then(|()| unsafe { driver::host_free(p.cast()) });
        if let Err(e) = freed {
            tracing::error!("{e}");
        }
    });
    // SAFETY: valid for `floats` initialised floats until `release` runs; owned by nothing else.
    Ok(unsafe { PinnedBuf::from_raw(ptr, floats, release) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stay_within_capacity_and_name_what_is_left() {
        let m = DeviceMemory::new(1000);
        m.charge(800).unwrap();
        match m.charge(204) {
            Err(Error::DeviceOutOfMemory { requested: 204, available: 200, capacity: 1000 }) => {}
            other => panic!("{other:?}"),
        }
        m.charge(200).unwrap();
        assert_eq!(m.used(), 1000);
    }
}

//! GPU allocations within the device's capacity, and page-locked host
//! buffers. Owns the capacity meter (`geeps_core::device::CapacityMeter`) and the
//! table of live allocations (so a dropped device frees what is left). Must
//! never free memory that enqueued work may still use: callers guarantee it.

use std::collections::HashMap;
use std::sync::Arc;

use geeps_core::device::{CapacityMeter, DevicePtr, PinnedBuf};
use geeps_core::{Error, Result};
use parking_lot::Mutex;

use crate::driver::{self, Context, Stream};

const FLOAT: usize = std::mem::size_of::<f32>();

pub(crate) struct DeviceMemory {
    meter: CapacityMeter,
    /// Address → bytes charged.
    live: Mutex<HashMap<u64, usize>>,
}

impl DeviceMemory {
    pub(crate) fn new(capacity: usize) -> Self {
        DeviceMemory { meter: CapacityMeter::new(capacity), live: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn used(&self) -> usize {
        self.meter.used()
    }

    /// `floats` zeroed floats of GPU memory, cleared on `stream` (which this
    /// waits for: allocation is never on the hot path).
    pub(crate) fn alloc(&self, floats: usize, stream: Stream) -> Result<DevicePtr> {
        // At least one float, so every allocation has its own address.
        let bytes = floats.max(1).checked_mul(FLOAT).ok_or_else(|| too_large(floats))?;
        self.meter.charge(bytes)?;
        let ptr = match driver::mem_alloc(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.meter.release(bytes);
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
        self.meter.release(bytes);
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

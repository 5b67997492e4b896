//! The row indexes uploaded to the GPU, behind the engine's ids. Indexes do
//! not count against the device's capacity (the trait says so: they are small
//! and built once). Uploads wait for their copy, so an index is complete
//! before any stream can use it; frees wait for nothing, which the caller's
//! contract (no enqueued work uses the index) makes sound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use geeps_core::device::{IndexId, RowPair};
use geeps_core::{Error, Result};
use parking_lot::Mutex;

use crate::driver::{self, Stream};
use crate::index_layout::encode_index;
use crate::kernels::ResidentIndex;

pub(crate) struct Indexes {
    next: AtomicU64,
    live: Mutex<HashMap<u64, ResidentIndex>>,
}

impl Default for Indexes {
    fn default() -> Self {
        Indexes { next: AtomicU64::new(1), live: Mutex::new(HashMap::new()) }
    }
}

impl Indexes {
    /// Checks, encodes and copies `pairs` to the GPU through `stream`.
    pub(crate) fn upload(&self, pairs: &[RowPair], stream: Stream) -> Result<IndexId> {
        let words = encode_index(pairs)?;
        let count = u32::try_from(pairs.len())
            .map_err(|_| Error::Device(format!("an index of {} rows exceeds the kernels' u32 count", pairs.len())))?;
        let index = if words.is_empty() {
            ResidentIndex { ptr: 0, pairs: 0 }
        } else {
            let bytes = std::mem::size_of_val(words.as_slice());
            let ptr = driver::mem_alloc(bytes)?;
            // SAFETY: `words` outlives the copy, which is waited for below;
            // `ptr` is the fresh allocation of `bytes`.
            let copied = unsafe { driver::memcpy_h2d(stream, ptr, words.as_ptr().cast(), bytes) }
                .and_then(|()| stream.synchronize());
            if let Err(e) = copied {
                // SAFETY: nothing else knows `ptr`; the failed copy is over.
                if let Err(free) = unsafe { driver::mem_free(ptr) } {
                    tracing::error!("{free}");
                }
                return Err(e);
            }
            ResidentIndex { ptr, pairs: count }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().insert(id, index);
        Ok(IndexId(id))
    }

    pub(crate) fn get(&self, id: IndexId) -> Result<ResidentIndex> {
        self.live
            .lock()
            .get(&id.0)
            .copied()
            .ok_or_else(|| Error::Device(format!("index {} is not loaded on this CUDA device", id.0)))
    }

    pub(crate) fn free(&self, id: IndexId) {
        let Some(index) = self.live.lock().remove(&id.0) else {
            tracing::error!(?id, "free of an index the CUDA device does not hold; ignored");
            return;
        };
        if index.ptr != 0 {
            // SAFETY: the index was ours and its id is now gone; the engine
            // frees an index only once no work uses it.
            if let Err(e) = unsafe { driver::mem_free(index.ptr) } {
                tracing::error!("{e}");
            }
        }
    }

    /// Frees every index.
    ///
    /// # Safety
    /// No index id is used afterwards, and no enqueued work uses any.
    pub(crate) unsafe fn free_all(&self) {
        let ids: Vec<u64> = self.live.lock().keys().copied().collect();
        for id in ids {
            self.free(IndexId(id));
        }
    }
}

//! Receive buffers recycled across frames of one connection. A frame's
//! payload is read straight into a spare buffer's uninitialised capacity
//! and handed out as `Bytes`; when its last holder drops it (the puller
//! once rows are merged, the keeper once deltas are applied), the buffer
//! comes back for a later frame. A fresh allocation per frame would be
//! page-faulted in, cleared by the kernel and unmapped again every clock.
//! It owns spare buffers only; it never reads a socket or looks inside a
//! payload.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

/// Payloads below this size are allocated per frame: small allocations come
/// from the allocator's own free lists, without page faults.
const POOLED_FROM: usize = 64 * 1024;

/// Spare receive buffers of one connection.
#[derive(Clone)]
pub(crate) struct RecvPool {
    spares: Arc<Mutex<Vec<Vec<u8>>>>,
    keep: usize,
}

impl RecvPool {
    /// A pool that keeps at most `keep` spare buffers.
    pub(crate) fn new(keep: usize) -> Self {
        RecvPool { spares: Arc::new(Mutex::new(Vec::new())), keep }
    }

    /// An empty buffer with room for `len` bytes.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let mut v = self.spare(len).unwrap_or_else(|| Vec::with_capacity(len));
        v.clear();
        v
    }

    /// A buffer of exactly `len` bytes for a caller that overwrites every
    /// one: a recycled buffer keeps what it held (only bytes it never held
    /// are zeroed), so a buffer reused every clock is not cleared every clock.
    pub(crate) fn take_to_overwrite(&self, len: usize) -> Vec<u8> {
        let mut v = self.spare(len).unwrap_or_else(|| Vec::with_capacity(len));
        v.truncate(len);
        v.resize(len, 0);
        v
    }

    fn spare(&self, len: usize) -> Option<Vec<u8>> {
        if len < POOLED_FROM {
            return None;
        }
        let mut spares = self.spares.lock();
        let i = spares.iter().position(|v| v.capacity() >= len)?;
        Some(spares.swap_remove(i))
    }

    /// The filled buffer as `Bytes`, without copying; it returns to the pool
    /// when the last clone drops.
    pub(crate) fn share(&self, v: Vec<u8>) -> Bytes {
        if v.capacity() < POOLED_FROM {
            return Bytes::from(v);
        }
        Bytes::from_owner(Pooled { v, home: self.clone() })
    }

    fn give_back(&self, v: Vec<u8>) {
        let mut spares = self.spares.lock();
        if spares.len() < self.keep {
            spares.push(v);
        }
    }

    #[cfg(test)]
    pub(crate) fn spare_count(&self) -> usize {
        self.spares.lock().len()
    }
}

struct Pooled {
    v: Vec<u8>,
    home: RecvPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.v
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.home.give_back(std::mem::take(&mut self.v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_holder_drops() {
        let pool = RecvPool::new(1);
        let mut v = pool.take(POOLED_FROM);
        v.extend(std::iter::repeat_n(7u8, POOLED_FROM));
        let ptr = v.as_ptr();
        let b = pool.share(v);
        let held = b.clone();
        drop(b);
        assert_eq!(pool.spare_count(), 0, "a clone still holds it");
        assert_eq!(held[POOLED_FROM - 1], 7);
        drop(held);
        assert_eq!(pool.spare_count(), 1);
        let again = pool.take(POOLED_FROM);
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0), "the same memory, emptied");
        // A larger frame than any spare gets its own buffer.
        drop(pool.share(again));
        assert!(pool.take(2 * POOLED_FROM).capacity() >= 2 * POOLED_FROM);
        assert_eq!(pool.spare_count(), 1);
    }

    #[test]
    fn keeps_at_most_its_limit_and_skips_small_frames() {
        let pool = RecvPool::new(1);
        let a = pool.share(vec![1u8; POOLED_FROM]);
        let b = pool.share(vec![2u8; POOLED_FROM]);
        drop((a, b));
        assert_eq!(pool.spare_count(), 1);
        drop(pool.share(vec![3u8; 16]));
        assert_eq!(pool.spare_count(), 1);
        assert_eq!(&pool.share(vec![3u8; 16])[..], &[3u8; 16]);
    }

    #[test]
    fn a_buffer_to_overwrite_is_recycled_without_clearing() {
        let pool = RecvPool::new(2);
        assert_eq!(pool.take_to_overwrite(POOLED_FROM), vec![0u8; POOLED_FROM], "fresh memory is zeroed");
        drop(pool.share(vec![9u8; POOLED_FROM + 8]));
        let again = pool.take_to_overwrite(POOLED_FROM);
        assert_eq!(again.len(), POOLED_FROM);
        assert!(again.iter().all(|&b| b == 9), "kept what it held: nothing cleared");
        drop(pool.share(again));
        // Longer than it ever held: the old bytes stay, the new ones are zeros.
        let mut longer = pool.take(POOLED_FROM + 16);
        longer.extend(std::iter::repeat_n(5u8, 4));
        drop(pool.share(longer));
        let grown = pool.take_to_overwrite(POOLED_FROM + 16);
        assert_eq!(grown.len(), POOLED_FROM + 16);
        assert_eq!((&grown[..4], &grown[4..8]), (&[5u8; 4][..], &[0u8; 4][..]));
    }
}

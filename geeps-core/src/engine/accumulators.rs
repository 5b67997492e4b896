//! Recycled update accumulators. At each clock a partition's accumulator
//! becomes the outgoing message, and another takes its place. Taking a
//! fresh allocation every clock costs page faults to fill it and an unmap
//! (with a TLB shootdown across the process's threads) to free it; instead,
//! a message's accumulator comes back here when its last holder (the
//! transport, the read-my-writes in-flight list) drops it, and is handed out
//! at a later clock as it is, not zeroed: the clock's first update assigns
//! it when it covers the whole partition (the common case), and zeroes it
//! first only when it does not.
//!
//! The same spares serve the pre-update buffers sent as written
//! (`outgoing.rs`), one set per recorded access.
//!
//! It owns only spare vectors; it never decides when a clock ends.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::transport::bytes::float_bytes;

/// Accumulators kept per partition; more in flight are simply freed.
const KEEP: usize = 2;

/// Spare accumulators of one partition (holding old deltas); clones share them.
#[derive(Default, Clone)]
pub(crate) struct Accumulators {
    spares: Arc<Mutex<Vec<Vec<f32>>>>,
}

impl Accumulators {
    /// An accumulator of `len` floats, and whether it holds stale values
    /// (a recycled one) rather than zeros (a fresh one).
    pub(crate) fn take(&self, len: usize) -> (Vec<f32>, bool) {
        match self.spares.lock().pop() {
            Some(v) if v.len() == len => (v, true),
            _ => (vec![0.0; len], false),
        }
    }

    /// The accumulator as message bytes, without copying; it returns here
    /// when the last clone of the bytes drops.
    pub(crate) fn message(&self, values: Vec<f32>) -> Bytes {
        if cfg!(target_endian = "little") {
            Bytes::from_owner(Recycled { values, home: self.clone() })
        } else {
            crate::transport::bytes::bytes_from_floats(&values)
        }
    }

    /// Keeps `values` as a spare, unless enough are kept already.
    pub(crate) fn recycle(&self, values: Vec<f32>) {
        let mut spares = self.spares.lock();
        if !values.is_empty() && spares.len() < KEEP {
            spares.push(values);
        }
    }
}

struct Recycled {
    values: Vec<f32>,
    home: Accumulators,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        // Only mutated in `drop`, when no view remains.
        float_bytes(&self.values)
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        self.home.recycle(std::mem::take(&mut self.values));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulators_come_back_once_every_holder_drops() {
        let acc = Accumulators::default();
        let (mut v, stale) = acc.take(4);
        assert!(!stale, "a fresh accumulator is zeroed");
        assert_eq!(v, vec![0.0; 4]);
        v.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        let ptr = v.as_ptr();
        let msg = acc.message(v);
        let held = msg.clone();
        drop(msg);
        assert_eq!(&held[..4], &1.0f32.to_le_bytes());
        // Still held: the next accumulator is a new one.
        let (other, _) = acc.take(4);
        assert_ne!(other.as_ptr(), ptr);
        drop(held);
        let (again, stale) = acc.take(4);
        assert!(stale, "a recycled accumulator is handed out as it is");
        assert_eq!(again, vec![1.0, 2.0, 3.0, 4.0]);
        if cfg!(target_endian = "little") {
            assert_eq!(again.as_ptr(), ptr, "the message's accumulator is reused");
        }
        // A spare of another length is not handed out.
        drop(acc.message(again));
        assert_eq!(acc.take(8), (vec![0.0; 8], false));
    }
}

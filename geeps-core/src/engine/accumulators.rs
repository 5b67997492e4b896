//! Recycled update accumulators. At each clock a partition's accumulator
//! becomes the outgoing message, and a zeroed one takes its place. Taking a
//! fresh allocation every clock costs page faults to fill it and an unmap
//! (with a TLB shootdown across the process's threads) to free it; instead,
//! a message's accumulator comes back here when its last holder (the
//! transport, the read-my-writes in-flight list) drops it, is zeroed by that
//! holder, and is handed out at a later clock.
//!
//! It owns only spare vectors; it never decides when a clock ends.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::transport::float_bytes;

/// Accumulators kept per partition; more in flight are simply freed.
const KEEP: usize = 2;

/// Spare zeroed accumulators of one partition.
#[derive(Default)]
pub(crate) struct Accumulators {
    spares: Arc<Mutex<Vec<Vec<f32>>>>,
}

impl Accumulators {
    /// A zeroed accumulator of `len` floats.
    pub(crate) fn take(&self, len: usize) -> Vec<f32> {
        match self.spares.lock().pop() {
            Some(v) if v.len() == len => v,
            _ => vec![0.0; len],
        }
    }

    /// The accumulator as message bytes, without copying; it returns here
    /// when the last clone of the bytes drops.
    pub(crate) fn message(&self, values: Vec<f32>) -> Bytes {
        if cfg!(target_endian = "little") {
            Bytes::from_owner(Recycled { values, home: self.spares.clone() })
        } else {
            crate::transport::bytes_from_floats(&values)
        }
    }
}

struct Recycled {
    values: Vec<f32>,
    home: Arc<Mutex<Vec<Vec<f32>>>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        // Only mutated in `drop`, when no view remains.
        float_bytes(&self.values)
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if self.home.lock().len() >= KEEP {
            return;
        }
        let mut values = std::mem::take(&mut self.values);
        // Zeroed here, on the thread that let go of the message, not on the
        // thread that ends the next clock.
        values.fill(0.0);
        let mut spares = self.home.lock();
        if spares.len() < KEEP {
            spares.push(values);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulators_come_back_zeroed_once_every_holder_drops() {
        let acc = Accumulators::default();
        let mut v = acc.take(4);
        v.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        let ptr = v.as_ptr();
        let msg = acc.message(v);
        let held = msg.clone();
        drop(msg);
        assert_eq!(&held[..4], &1.0f32.to_le_bytes());
        // Still held: the next accumulator is a new one.
        let other = acc.take(4);
        assert_ne!(other.as_ptr(), ptr);
        drop(held);
        let again = acc.take(4);
        assert_eq!(again, vec![0.0; 4]);
        if cfg!(target_endian = "little") {
            assert_eq!(again.as_ptr(), ptr, "the message's accumulator is reused");
        }
        // A spare of another length is not handed out.
        drop(acc.message(again));
        assert_eq!(acc.take(8).len(), 8);
    }
}

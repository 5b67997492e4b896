//! The byte count a device enforces its capacity against, shared by every
//! backend. It only counts; it never allocates.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// Bytes charged against a fixed capacity, safe to share between threads.
#[derive(Debug)]
pub struct CapacityMeter {
    capacity: usize,
    used: AtomicUsize,
}

impl CapacityMeter {
    /// A meter allowing `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        CapacityMeter { capacity, used: AtomicUsize::new(0) }
    }

    /// The bytes it allows in all.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Charges `bytes`, or fails with what is left without charging anything.
    pub fn charge(&self, bytes: usize) -> Result<()> {
        let mut current = self.used.load(Ordering::Relaxed);
        loop {
            if current.saturating_add(bytes) > self.capacity {
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

    /// Gives back `bytes` charged earlier.
    pub fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stay_within_capacity_and_name_what_is_left() {
        let m = CapacityMeter::new(1000);
        m.charge(800).unwrap();
        match m.charge(204) {
            Err(Error::DeviceOutOfMemory { requested: 204, available: 200, capacity: 1000 }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(m.used(), 800, "a refused charge charges nothing");
        m.charge(200).unwrap();
        assert_eq!(m.used(), 1000);
        m.release(1000);
        assert_eq!(m.used(), 0);
    }
}

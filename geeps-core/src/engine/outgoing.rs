//! Pre-update buffers that become the outgoing deltas. Where the host
//! addresses the device's memory, a pre-update that covers whole partitions
//! is handed a recycled host vector instead of a pool buffer, and at
//! `update` each whole partition's range of it is taken as that partition's
//! deltas for the clock, as the application wrote them; a pool buffer would
//! be assigned into the partition's accumulator first, a pass over the
//! table. The vector goes back to the access's spares (`accumulators.rs`),
//! as it is (not zeroed), when the last message holding a range of it
//! drops; spares are per access, so the sizes always match.
//!
//! While the application holds such a buffer its bytes are reserved in the
//! access buffer pool, as a pool buffer's would be (on a GPU the buffer is
//! device memory until `update`); afterwards they are outgoing deltas, host
//! memory like the accumulators.
//!
//! It owns the spare vectors and the shared ranges; it never decides which
//! accesses use them, and never touches a partition's state.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::device::DevicePtr;
use crate::engine::accumulators::Accumulators;
use crate::transport::bytes::float_bytes;

/// A pre-update buffer the application is filling.
pub(crate) struct OutgoingBuf {
    values: Vec<f32>,
    home: Accumulators,
}

impl OutgoingBuf {
    /// A buffer of `len` floats from `spares` (those of one recorded
    /// access): zeros when `zeroed`, otherwise whatever a recycled one holds.
    pub(crate) fn take(spares: &Accumulators, len: usize, zeroed: bool) -> Self {
        let (mut values, stale) = spares.take(len);
        if zeroed && stale {
            values.fill(0.0);
        }
        OutgoingBuf { values, home: spares.clone() }
    }

    /// Where the application writes (host memory, which the device addresses).
    pub(crate) fn ptr(&mut self) -> DevicePtr {
        DevicePtr(self.values.as_mut_ptr() as u64)
    }

    /// The filled buffer, shared by the ranges taken from it.
    pub(crate) fn into_shared(mut self) -> SharedDeltas {
        let values = std::mem::take(&mut self.values);
        SharedDeltas(Arc::new(Filled { values, home: self.home.clone() }))
    }
}

impl Drop for OutgoingBuf {
    /// A buffer discarded unapplied comes back as well.
    fn drop(&mut self) {
        self.home.recycle(std::mem::take(&mut self.values));
    }
}

struct Filled {
    values: Vec<f32>,
    home: Accumulators,
}

impl Drop for Filled {
    fn drop(&mut self) {
        self.home.recycle(std::mem::take(&mut self.values));
    }
}

/// A filled pre-update buffer, no longer written.
#[derive(Clone)]
pub(crate) struct SharedDeltas(Arc<Filled>);

impl SharedDeltas {
    /// The floats `range` of the buffer, held without copying (`None` when
    /// it does not lie inside the buffer).
    pub(crate) fn range(&self, range: Range<usize>) -> Option<DeltaRange> {
        (range.start <= range.end && range.end <= self.0.values.len())
            .then(|| DeltaRange { whole: self.0.clone(), range })
    }
}

/// One partition's deltas, a range of a filled pre-update buffer.
pub(crate) struct DeltaRange {
    whole: Arc<Filled>,
    range: Range<usize>,
}

impl DeltaRange {
    pub(crate) fn floats(&self) -> &[f32] {
        &self.whole.values[self.range.clone()]
    }

    /// The deltas as message bytes, without copying.
    pub(crate) fn message(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for DeltaRange {
    fn as_ref(&self) -> &[u8] {
        float_bytes(self.floats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_share_the_buffer_and_it_returns_once_every_range_drops() {
        let spares = Accumulators::default();
        let mut buf = OutgoingBuf::take(&spares, 6, true);
        let ptr = buf.ptr();
        // SAFETY: the buffer holds 6 floats and nothing else refers to them.
        unsafe { std::slice::from_raw_parts_mut(ptr.0 as *mut f32, 6) }.copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
        let shared = buf.into_shared();
        let (a, b) = (shared.range(0..2).unwrap(), shared.range(2..6).unwrap());
        assert!(shared.range(4..7).is_none(), "a range past the end is refused");
        drop(shared);
        assert_eq!(a.floats(), &[1., 2.]);
        let msg = b.message();
        assert_eq!(msg.len(), 16);
        assert_eq!(&msg[..4], &3.0f32.to_le_bytes()[..]);
        assert_eq!(msg.as_ptr() as u64, ptr.0 + 8, "the message is the buffer itself");
        drop(a);
        // Still held by the message: a new buffer.
        let mut other = OutgoingBuf::take(&spares, 6, false);
        assert_ne!(other.ptr(), ptr);
        drop(other);
        drop(msg);
        // Both came back; the filled one is handed out as it is, or zeroed.
        let mut kept = OutgoingBuf::take(&spares, 6, false);
        let mut zeroed = OutgoingBuf::take(&spares, 6, true);
        let (kp, zp) = (kept.ptr(), zeroed.ptr());
        // SAFETY: both buffers hold 6 floats and are only read here.
        let values = |p: DevicePtr| unsafe { std::slice::from_raw_parts(p.0 as *const f32, 6) }.to_vec();
        assert_eq!(kp, ptr, "the filled vector is reused");
        assert_eq!(values(kp), [1., 2., 3., 4., 5., 6.], "and handed out as it is");
        assert_eq!(values(zp), [0.0; 6], "a zeroed take is zeros");
        // Another length is not handed out.
        drop((kept, zeroed));
        assert_eq!(OutgoingBuf::take(&spares, 3, false).values, vec![0.0; 3]);
    }
}

//! What an acquisition yields: a filled buffer (or rows served in place)
//! with the data ages and write counts it was filled at, and the
//! allocator's prefetched results. Plain data; it never fills anything.

use crate::device::DevicePtr;
use crate::engine::buffer_pool::PoolBuf;
use crate::engine::outgoing::OutgoingBuf;
use crate::error::Result;

/// A filled buffer ready for the application.
pub(crate) struct Acquired {
    /// `None` when the access is served in place (pinned local data) or
    /// is an outgoing buffer.
    pub(crate) buffer: Option<PoolBuf>,
    /// A pre-update's buffer that becomes the outgoing deltas (see `outgoing.rs`).
    pub(crate) outgoing: Option<OutgoingBuf>,
    /// `floats` are reserved in the pool for `outgoing` (kept when an
    /// update takes the buffer, until the acquisition is discarded).
    pub(crate) reserved: bool,
    pub(crate) ptr: DevicePtr,
    pub(crate) floats: usize,
    /// Per parameter table read: the data age the buffer was filled at.
    pub(crate) ages: Vec<(usize, u64)>,
    /// Per table: the writes applied before the buffer was filled (the
    /// counter this acquisition orders itself after).
    pub(crate) writes_seen: Vec<(usize, u64)>,
    /// A handed-over buffer holding a posted save the store does not have
    /// yet (see `plan/handover.rs`): it must be saved, never just discarded.
    pub(crate) carried: bool,
    /// For a read served in place: the kept publications its rows are in,
    /// held so their memory is neither freed nor reused while it is.
    pub(crate) pinned: Vec<bytes::Bytes>,
}

impl Acquired {
    /// Whether the application works on stored rows themselves (a local
    /// access served in place), not on a copy.
    pub(crate) fn on_stored_rows(&self) -> bool {
        self.buffer.is_none() && self.outgoing.is_none() && self.pinned.is_empty()
    }
}

/// An acquisition done ahead of the application.
pub(crate) struct Prefetched {
    pub(crate) position: usize,
    /// `None` for a hand-over target: the application takes the buffer its
    /// own earlier post left in `Control::handed`.
    pub(crate) result: Option<Result<Acquired>>,
}

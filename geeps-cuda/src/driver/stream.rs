//! Streams and events as copyable handles. Streams never synchronise with the
//! legacy default stream (they are created non-blocking), so work of the
//! application on stream 0 never stalls geeps' transfers, or the reverse.

use cudarc::driver::result::{self, stream::StreamKind};
use cudarc::driver::sys;
use geeps_core::Result;

use super::errors::error;

#[derive(Clone, Copy)]
pub(crate) struct Stream(sys::CUstream);

#[derive(Clone, Copy)]
pub(crate) struct Event(sys::CUevent);

// SAFETY: driver handles, usable from any thread with the context current.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Stream {
    pub(crate) fn create() -> Result<Stream> {
        result::stream::create(StreamKind::NonBlocking).map(Stream).map_err(|e| error("creating a CUDA stream", e))
    }

    pub(crate) fn raw(self) -> sys::CUstream {
        self.0
    }

    /// Blocks until the stream's work so far has completed.
    pub(crate) fn synchronize(self) -> Result<()> {
        // SAFETY: the handle is live until `destroy`, which callers do last.
        unsafe { result::stream::synchronize(self.0) }.map_err(|e| error("waiting for a CUDA stream", e))
    }

    /// Later work on this stream waits for `event`; the host does not.
    pub(crate) fn wait(self, event: Event) -> Result<()> {
        // SAFETY: both handles are live (see `synchronize`).
        unsafe { result::stream::wait_event(self.0, event.0, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(|e| error("making a CUDA stream wait for an event", e))
    }

    /// # Safety
    /// The stream is not used afterwards.
    pub(crate) unsafe fn destroy(self) -> Result<()> {
        result::stream::destroy(self.0).map_err(|e| error("destroying a CUDA stream", e))
    }
}

impl Event {
    /// An event without timing, the cheapest kind to record and wait for.
    pub(crate) fn create() -> Result<Event> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(Event)
            .map_err(|e| error("creating a CUDA event", e))
    }

    /// Marks the current end of `stream`'s work.
    pub(crate) fn record(self, stream: Stream) -> Result<()> {
        // SAFETY: both handles are live.
        unsafe { result::event::record(self.0, stream.0) }.map_err(|e| error("recording a CUDA event", e))
    }

    /// Blocks until the work before the last record has completed.
    pub(crate) fn synchronize(self) -> Result<()> {
        // SAFETY: the handle is live.
        unsafe { result::event::synchronize(self.0) }.map_err(|e| error("waiting for a CUDA event", e))
    }

    /// # Safety
    /// The event is not used afterwards (a pending record still completes).
    pub(crate) unsafe fn destroy(self) -> Result<()> {
        result::event::destroy(self.0).map_err(|e| error("destroying a CUDA event", e))
    }
}

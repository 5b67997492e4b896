//! The device's streams and events behind the engine's ids. Streams live as
//! long as the device; an event lives from `record_event` until
//! `synchronize_event` releases it, and its handle is then kept for reuse, so
//! recording costs no driver allocation in steady state. Must never block on a
//! lock while the driver blocks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use geeps_core::device::{EventId, StreamId};
use geeps_core::{Error, Result};
use parking_lot::{Mutex, RwLock};

use crate::driver::{Event, Stream};

#[derive(Default)]
pub(crate) struct Streams {
    list: RwLock<Vec<Stream>>,
}

impl Streams {
    pub(crate) fn create(&self) -> Result<StreamId> {
        let stream = Stream::create()?;
        let mut list = self.list.write();
        list.push(stream);
        Ok(StreamId((list.len() - 1) as u32))
    }

    pub(crate) fn get(&self, id: StreamId) -> Result<Stream> {
        self.list
            .read()
            .get(id.0 as usize)
            .copied()
            .ok_or_else(|| Error::Device(format!("stream {} was not created on this CUDA device", id.0)))
    }

    /// Waits for every stream, then destroys them all.
    ///
    /// # Safety
    /// No stream id is used afterwards.
    pub(crate) unsafe fn destroy_all(&self) {
        for s in self.list.write().drain(..) {
            if let Err(e) = s.synchronize().and_then(|()| s.destroy()) {
                tracing::warn!("{e}");
            }
        }
    }
}

pub(crate) struct Events {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Event>>,
    spare: Mutex<Vec<Event>>,
}

impl Default for Events {
    fn default() -> Self {
        Events { next: AtomicU64::new(1), live: Mutex::new(HashMap::new()), spare: Mutex::new(Vec::new()) }
    }
}

impl Events {
    /// Records a fresh event on `stream`.
    pub(crate) fn record(&self, stream: Stream) -> Result<EventId> {
        let event = match self.spare.lock().pop() {
            Some(e) => e,
            None => Event::create()?,
        };
        if let Err(e) = event.record(stream) {
            self.spare.lock().push(event);
            return Err(e);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.lock().insert(id, event);
        Ok(EventId(id))
    }

    pub(crate) fn get(&self, id: EventId) -> Result<Event> {
        self.live.lock().get(&id.0).copied().ok_or_else(|| unknown(id))
    }

    /// Waits for `id` outside any lock, then keeps its handle for reuse.
    pub(crate) fn synchronize_and_release(&self, id: EventId) -> Result<()> {
        let event = self.live.lock().remove(&id.0).ok_or_else(|| unknown(id))?;
        let waited = event.synchronize();
        self.spare.lock().push(event);
        waited
    }

    /// Destroys every event, live or spare.
    ///
    /// # Safety
    /// No event id is used afterwards.
    pub(crate) unsafe fn destroy_all(&self) {
        let live: Vec<Event> = self.live.lock().drain().map(|(_, e)| e).collect();
        for e in live.into_iter().chain(self.spare.lock().drain(..)) {
            if let Err(err) = e.destroy() {
                tracing::warn!("{err}");
            }
        }
    }
}

fn unknown(id: EventId) -> Error {
    Error::Device(format!("event {} is not live on this CUDA device (already synchronized, or never recorded)", id.0))
}

//! Events: a record remembers the stream's last enqueued operation at that
//! moment; the event is complete once that operation has run. An event never
//! recorded is complete. `cuStreamWaitEvent` captures the event's current
//! record when it is called, as the driver does (a later re-record does not
//! change what the stream waits for). Must never block while holding the
//! event's lock.

use std::sync::{Arc, Mutex};

use crate::handles::{Kind, Registry};
use crate::progress::Progress;
use crate::racecheck::{self, Clock};

pub struct Event {
    pub context: u64,
    last: Mutex<Option<(Arc<Progress>, u64)>>,
    /// The recording stream's race-detector clock at the record.
    clock: Mutex<Option<Arc<Clock>>>,
}

/// Live events behind their handles.
pub static EVENTS: Registry<Arc<Event>> = Registry::new(Kind::Event);

impl Event {
    pub fn new(context: u64) -> Event {
        Event { context, last: Mutex::new(None), clock: Mutex::new(None) }
    }

    /// Marks the current end of a stream's queue.
    pub fn record(&self, progress: &Arc<Progress>) {
        let mark = progress.mark();
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some((progress.clone(), mark));
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = racecheck::snapshot(progress.lane);
    }

    /// The race-detector clock of the current record (None: never recorded, or the detector is off).
    pub fn clock(&self) -> Option<Arc<Clock>> {
        self.clock.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What a wait on the event must wait for now (None: nothing).
    pub fn target(&self) -> Option<(Arc<Progress>, u64)> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the record has completed; if so the host has seen it (an ordering edge).
    pub fn is_complete(&self) -> bool {
        let clock = self.clock();
        let complete = self.target().is_none_or(|(p, seq)| p.poll(seq));
        if let Some(c) = clock.filter(|_| complete) {
            racecheck::host_joins(&c);
        }
        complete
    }

    pub fn synchronize(&self) {
        let clock = self.clock();
        if let Some((p, seq)) = self.target() {
            p.wait_for(seq);
        }
        if let Some(c) = clock {
            racecheck::host_joins(&c);
        }
    }
}

/// Unregisters every event of the context `handle`.
pub fn destroy_context_events(handle: u64) {
    EVENTS.remove_where(|e| e.context == handle);
}

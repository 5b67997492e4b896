//! How far a stream's queue got: the sequence number of the last operation
//! enqueued, of the last one completed and, in lazy mode, of the last one
//! something waits for; what events, waits and synchronisation look at.
//! Also the stream's lane in the race detector. Must never run or enqueue an
//! operation itself.

use std::sync::{Arc, Condvar, Mutex};

use crate::context::Context;
use crate::result::Res;

struct Counts {
    enqueued: u64,
    completed: u64,
    /// The last operation something waited for or polled (lazy mode runs up to it).
    demanded: u64,
}

/// How far a stream's queue got; what events and waits look at.
pub struct Progress {
    pub context: Arc<Context>,
    /// The stream's lane in the race detector.
    pub lane: usize,
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Progress {
    /// The progress of a new stream of `context`, `lane` in the race detector.
    pub fn new(context: Arc<Context>, lane: usize) -> Progress {
        Progress {
            context,
            lane,
            counts: Mutex::new(Counts { enqueued: 0, completed: 0, demanded: 0 }),
            changed: Condvar::new(),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enqueues the next operation: `send` gets its sequence number, which
    /// counts as enqueued only if `send` succeeds.
    pub fn enqueue(&self, send: impl FnOnce(u64) -> Res<()>) -> Res<u64> {
        let mut counts = self.counts();
        let seq = counts.enqueued + 1;
        send(seq)?;
        counts.enqueued = seq;
        Ok(seq)
    }

    /// The sequence number of the last operation enqueued.
    pub fn mark(&self) -> u64 {
        self.counts().enqueued
    }

    /// Whether operation `seq` and all before it have completed.
    pub fn done(&self, seq: u64) -> bool {
        self.counts().completed >= seq
    }

    /// As `done`, for a caller that polls: in lazy mode, asks for the work.
    pub fn poll(&self, seq: u64) -> bool {
        self.demand(seq);
        self.done(seq)
    }

    /// Asks for operation `seq` and all before it to run (lazy mode waits for this).
    pub fn demand(&self, seq: u64) {
        let mut counts = self.counts();
        if counts.demanded < seq {
            counts.demanded = seq;
            self.changed.notify_all();
        }
    }

    /// Blocks until operation `seq` has completed.
    pub fn wait_for(&self, seq: u64) {
        self.demand(seq);
        let mut counts = self.counts();
        while counts.completed < seq {
            counts = self.changed.wait(counts).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks the stream's thread until something asks for operation `seq`.
    pub fn await_demand(&self, seq: u64) {
        let mut counts = self.counts();
        while counts.demanded < seq {
            counts = self.changed.wait(counts).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Publishes that operation `seq` (and all before it) has run.
    pub fn complete(&self, seq: u64) {
        self.counts().completed = seq;
        self.changed.notify_all();
    }
}

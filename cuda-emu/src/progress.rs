//! How far a stream's queue got: the sequence number of the last operation
//! enqueued and of the last one completed, what events, waits and
//! synchronisation look at. Must never run or enqueue an operation itself.

use std::sync::{Arc, Condvar, Mutex};

use crate::context::Context;
use crate::result::Res;

/// How far a stream's queue got; what events and waits look at.
pub struct Progress {
    pub context: Arc<Context>,
    /// (operations enqueued, operations completed).
    counts: Mutex<(u64, u64)>,
    changed: Condvar,
}

impl Progress {
    pub fn new(context: Arc<Context>) -> Progress {
        Progress { context, counts: Mutex::new((0, 0)), changed: Condvar::new() }
    }

    /// Enqueues the next operation: `send` gets its sequence number, which
    /// counts as enqueued only if `send` succeeds.
    pub fn enqueue(&self, send: impl FnOnce(u64) -> Res<()>) -> Res<u64> {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let seq = counts.0 + 1;
        send(seq)?;
        counts.0 = seq;
        Ok(seq)
    }

    /// The sequence number of the last operation enqueued.
    pub fn mark(&self) -> u64 {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Whether operation `seq` and all before it have completed.
    pub fn done(&self, seq: u64) -> bool {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).1 >= seq
    }

    /// Blocks until operation `seq` has completed.
    pub fn wait_for(&self, seq: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        while counts.1 < seq {
            counts = self.changed.wait(counts).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Publishes that operation `seq` (and all before it) has run.
    pub fn complete(&self, seq: u64) {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).1 = seq;
        self.changed.notify_all();
    }
}

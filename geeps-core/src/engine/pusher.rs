//! A pusher thread (one per partition): sends clocked update batches to the
//! keeper that owns the partition, in clock order, for transports whose push
//! may block (the in-process keeper applies deltas in `push`). A transport
//! whose push only queues is pushed to by the reclaimer directly. It never
//! touches the cache.

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::engine::shared::Shared;
use crate::transport::{Transport, UpdateBatch};

pub(crate) fn run(sh: Arc<Shared>, transport: Arc<dyn Transport>, rx: Receiver<UpdateBatch>) {
    for batch in rx {
        if let Err(e) = transport.push(batch) {
            sh.fail(e);
            return;
        }
    }
}

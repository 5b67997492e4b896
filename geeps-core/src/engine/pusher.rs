//! A pusher thread (one per partition): sends clocked update batches to the
//! keeper that owns the partition, in clock order. It never touches the cache.

use std::sync::Arc;

use crossbeam_channel::Receiver;

use crate::engine::Shared;
use crate::transport::{Transport, UpdateBatch};

pub(crate) fn run(sh: Arc<Shared>, transport: Arc<dyn Transport>, rx: Receiver<UpdateBatch>) {
    for batch in rx {
        if let Err(e) = transport.push(batch) {
            sh.fail(e);
            return;
        }
    }
}

//! The reclaimer threads: run post_read, update, post_local_access and
//! table_clock in the order the application issued them, so buffers return to
//! the pool and deltas reach the cache and the pushers without blocking the
//! application. Two lanes, each in order: parameter releases (reads, updates,
//! clocks) and local-data saves. Parameter and local tables share no rows, so
//! a save never waits behind a large update, and the write counters stay in
//! order per table. A lane never waits on anything but its queue.

use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::device::StreamId;
use crate::engine::acquired::Acquired;
use crate::engine::index::AccessPlan;
use crate::engine::push;
use crate::engine::shared::Shared;
use crate::engine::staging::Staging;
use crate::error::Error;
use crate::transport::{Transport, UpdateBatch};

pub(crate) enum Release {
    PostRead(Acquired),
    Update(Arc<AccessPlan>, Acquired),
    PostLocal { plan: Arc<AccessPlan>, acquired: Acquired, save: bool },
    Clock { table: usize, clock: u64 },
}

/// Which lane a release belongs to.
pub(crate) fn is_local(op: &Release) -> bool {
    matches!(op, Release::PostLocal { .. })
}

/// Where the parameter lane sends clocked batches.
pub(crate) enum Pushers {
    /// The local lane pushes nothing.
    None,
    /// One pusher thread per partition (a transport whose push may block).
    Threads(Vec<Sender<UpdateBatch>>),
    /// The transport itself: its push only queues.
    Direct(Arc<dyn Transport>),
}

impl Pushers {
    fn push(&self, sh: &Shared, batch: UpdateBatch) {
        let sent = match self {
            Pushers::None => Err(Error::ShutDown("the local lane has no pushers".into())),
            Pushers::Threads(tx) => tx[batch.partition as usize]
                .send(batch)
                .map_err(|_| Error::ShutDown("pusher thread has stopped".into())),
            Pushers::Direct(t) => t.push(batch),
        };
        if let Err(e) = sent {
            sh.fail(e);
        }
    }
}

/// Runs one lane. `stream` is the lane's own; only the parameter lane pushes.
pub(crate) fn run(sh: Arc<Shared>, rx: Receiver<Release>, pushers: Pushers, stream: StreamId) {
    let mut staging = Staging::default();
    for op in rx {
        let result = match op {
            Release::PostRead(acq) => {
                sh.discard(acq);
                Ok(())
            }
            Release::Update(plan, mut acq) => {
                let r = push::apply_update(&sh, &plan, &mut acq, &mut staging);
                sh.discard(acq);
                bump_writes(&sh, &plan);
                r
            }
            Release::PostLocal { plan, acquired, save } => {
                let r = if save { push::save_local(&sh, stream, &plan, &acquired, &mut staging) } else { Ok(()) };
                sh.discard(acquired);
                if save {
                    bump_writes(&sh, &plan);
                }
                r
            }
            Release::Clock { table, clock } => {
                for batch in push::end_clock(&sh, table, clock) {
                    pushers.push(&sh, batch);
                }
                Ok(())
            }
        };
        if let Err(e) = result {
            sh.fail(e);
        }
    }
}

fn bump_writes(sh: &Shared, plan: &AccessPlan) {
    sh.writes.lock().count(plan);
    sh.writes_cond.notify_all();
}

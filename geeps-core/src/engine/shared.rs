//! The engine state an instance's threads share: stores, recorded sequence
//! and its plans, buffer pool, write counters, the allocator's control block
//! and the failure flag, with the waits on them. It owns the state and its
//! locks; the data work is in `fill.rs`, `push.rs` and `pull.rs`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::config::Config;
use crate::device::{Device, StreamId};
use crate::engine::acquired::{Acquired, Prefetched};
use crate::engine::buffer_pool::BufferPool;
use crate::engine::index::AccessPlan;
use crate::engine::store::Stores;
use crate::engine::write_counts::WriteCounts;
use crate::error::{Error, Result};
use crate::plan::recorder::{OpKind, RecordedOp};
use crate::stats::StatsCollector;
use crate::table::TableSpec;
use crate::transport::landing::Landing;

/// What the allocator is doing; changed only under `Shared::control`.
pub(crate) struct Control {
    /// Bumped whenever the application leaves the recorded order: work of an
    /// older epoch is discarded.
    pub(crate) epoch: u64,
    /// Next recorded position the allocator looks at.
    pub(crate) cursor: usize,
    /// Predicted clock per table at `cursor`.
    pub(crate) clocks: Vec<u64>,
    /// Predicted writes issued per table at `cursor`.
    pub(crate) writes: WriteCounts,
    pub(crate) ready: VecDeque<Prefetched>,
    /// Buffers handed over by the application's posts, by target position.
    pub(crate) handed: HashMap<usize, Acquired>,
    /// Acquisitions of this epoch ready or in progress.
    pub(crate) ahead: usize,
    /// Set while the application serves a call on the slow path: the pool is
    /// then its own.
    pub(crate) paused: bool,
    pub(crate) shutdown: bool,
}

pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) device: Arc<dyn Device>,
    pub(crate) host_addressable: bool,
    pub(crate) rank: usize,
    pub(crate) tables: Arc<[TableSpec]>,
    pub(crate) stores: Stores,
    pub(crate) ops: Vec<RecordedOp>,
    /// Per recorded position: the plan of an acquisition.
    pub(crate) plans: Vec<Option<Arc<AccessPlan>>>,
    /// Per recorded position: the release that hands its buffer over, and to
    /// which acquisition.
    pub(crate) handover_to: Vec<Option<usize>>,
    /// Prefetched acquisitions per recorded iteration (the allocator's
    /// look-ahead bound); 0 when there is nothing to prefetch.
    pub(crate) acquires_per_iteration: usize,
    pub(crate) pool: BufferPool,
    /// Writes applied by the reclaimer, per table.
    pub(crate) writes: Mutex<WriteCounts>,
    pub(crate) writes_cond: Condvar,
    pub(crate) control: Mutex<Control>,
    pub(crate) control_cond: Condvar,
    failure: Mutex<Option<Error>>,
    failed: AtomicBool,
    /// Set by `Geeps::shutdown`: the application's blocked calls return
    /// `Error::ShutDown` (the background threads drain on their own terms).
    stopped: AtomicBool,
    pub(crate) stats: StatsCollector,
    pub(crate) alloc_stream: StreamId,
    pub(crate) reclaim_stream: StreamId,
    /// The local-data lane's own stream (see `reclaimer.rs`).
    pub(crate) local_stream: StreamId,
    /// One per partition, so pullers of different partitions overlap.
    pub(crate) pull_streams: Vec<StreamId>,
    /// Table-wide buffers publications land in, for tables read across
    /// partitions in one run (host-addressable devices only).
    pub(crate) landing: Option<Landing>,
}

/// How a wait behaves.
#[derive(Clone, Copy)]
pub(crate) struct WaitPolicy {
    /// Fail after this instant.
    pub(crate) deadline: Option<Instant>,
    /// Log when waiting longer than the configured interval.
    pub(crate) log: bool,
}

impl WaitPolicy {
    /// Background waits: never time out, never log (the application's own
    /// wait reports what the background is stuck on).
    pub(crate) const BACKGROUND: WaitPolicy = WaitPolicy { deadline: None, log: false };
}

#[allow(clippy::too_many_arguments)]
impl Shared {
    pub(crate) fn new(
        config: Config,
        device: Arc<dyn Device>,
        rank: usize,
        tables: Arc<[TableSpec]>,
        stores: Stores,
        ops: Vec<RecordedOp>,
        plans: Vec<Option<Arc<AccessPlan>>>,
        handover_to: Vec<Option<usize>>,
        pool_bytes: usize,
        partitions: usize,
        landing: Option<Landing>,
    ) -> Result<Self> {
        let host_addressable = device.info().host_addressable;
        // Only what the allocator prefetches counts: accesses served in
        // place are the application's own.
        let acquires_per_iteration =
            (0..ops.len()).filter(|&i| ops[i].kind.is_acquire() && !in_place(&ops, &plans, i)).count();
        let n = tables.len();
        Ok(Shared {
            pool: BufferPool::new(device.clone(), pool_bytes),
            alloc_stream: device.create_stream()?,
            reclaim_stream: device.create_stream()?,
            local_stream: device.create_stream()?,
            pull_streams: (0..partitions.max(1)).map(|_| device.create_stream()).collect::<Result<_>>()?,
            config,
            device,
            host_addressable,
            rank,
            tables,
            stores,
            ops,
            plans,
            handover_to,
            acquires_per_iteration,
            writes: Mutex::new(WriteCounts::new(n)),
            writes_cond: Condvar::new(),
            control: Mutex::new(Control {
                epoch: 0,
                cursor: 0,
                clocks: vec![0; n],
                writes: WriteCounts::new(n),
                ready: VecDeque::new(),
                handed: HashMap::new(),
                ahead: 0,
                paused: false,
                shutdown: false,
            }),
            control_cond: Condvar::new(),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            stats: StatsCollector::new(),
            landing,
        })
    }

    pub(crate) fn width(&self) -> usize {
        self.config.row_width
    }

    /// The error every blocked or later call returns once the instance failed.
    pub(crate) fn failure(&self) -> Option<Error> {
        if self.failed.load(Ordering::Acquire) {
            self.failure.lock().clone()
        } else {
            None
        }
    }

    /// What ends a wait of the application's: the instance's failure, or
    /// its shutdown (from any thread) while the call waited.
    pub(crate) fn app_abort(&self) -> Option<Error> {
        if let Some(e) = self.failure() {
            return Some(e);
        }
        if self.stopped.load(Ordering::Acquire) {
            return Some(Error::ShutDown("the instance was shut down while this call waited".into()));
        }
        None
    }

    /// Marks the instance shut down and wakes every waiter: the
    /// application's blocked calls return `Error::ShutDown` at once.
    pub(crate) fn stop(&self) {
        self.control.lock().shutdown = true;
        self.stopped.store(true, Ordering::Release);
        self.wake_all();
    }

    /// Fails the instance: every waiter wakes and returns `error`.
    pub(crate) fn fail(&self, error: Error) {
        {
            let mut f = self.failure.lock();
            if f.is_none() {
                tracing::error!(rank = self.rank, %error, "geeps instance failed");
                *f = Some(error);
            }
        }
        self.failed.store(true, Ordering::Release);
        self.wake_all();
    }

    /// Wakes every waiter so it re-checks its abort conditions.
    pub(crate) fn wake_all(&self) {
        self.control_cond.notify_all();
        self.writes_cond.notify_all();
        self.pool.wake();
        for parts in self.stores.params.iter().flatten() {
            for p in parts {
                // Take the lock so no waiter misses the notification between
                // its check and its wait.
                drop(p.state.lock());
                p.cond.notify_all();
            }
        }
    }

    /// Waits on `cond` until `ready` holds. `abort` is polled; `describe`
    /// says what is awaited (for the slow-wait log and the timeout error).
    pub(crate) fn wait<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        cond: &Condvar,
        policy: WaitPolicy,
        mut ready: impl FnMut(&mut T) -> bool,
        abort: &dyn Fn() -> Option<Error>,
        describe: &dyn Fn(&T) -> String,
    ) -> Result<Duration> {
        let start = Instant::now();
        let mut next_log = start + self.config.slow_wait_log;
        loop {
            if ready(guard) {
                return Ok(start.elapsed());
            }
            if let Some(e) = abort() {
                return Err(e);
            }
            let now = Instant::now();
            if let Some(d) = policy.deadline {
                if now >= d {
                    return Err(Error::Timeout {
                        what: describe(guard),
                        waited_ms: start.elapsed().as_millis() as u64,
                    });
                }
            }
            if policy.log && now >= next_log {
                tracing::warn!(
                    rank = self.rank,
                    waited_ms = start.elapsed().as_millis() as u64,
                    "still waiting for {}",
                    describe(guard)
                );
                next_log = now + self.config.slow_wait_log;
            }
            // Bounded sleeps: aborts raised elsewhere are seen within 50 ms
            // even if their notification went to another condition variable.
            cond.wait_for(guard, Duration::from_millis(50));
        }
    }

    /// Whether the recorded acquisition at `pos` is a local access served in
    /// place: no buffer, no copy, so the allocator never prefetches it.
    pub(crate) fn served_in_place(&self, pos: usize) -> bool {
        in_place(&self.ops, &self.plans, pos)
    }

    /// Returns an acquisition's buffer to the pool (an outgoing buffer's
    /// reservation; the buffer itself, if not taken by an update, goes back
    /// to its spares).
    pub(crate) fn discard(&self, acquired: Acquired) {
        if let Some(b) = acquired.buffer {
            self.pool.release(b);
        }
        if acquired.reserved {
            self.pool.unreserve(acquired.floats);
        }
    }
}

/// Whether the recorded acquisition at `pos` is a local access served in place.
fn in_place(ops: &[RecordedOp], plans: &[Option<Arc<AccessPlan>>], pos: usize) -> bool {
    matches!(ops[pos].kind, OpKind::LocalAccess { .. }) && plans[pos].as_ref().is_some_and(|p| p.in_place.is_some())
}

//! `Geeps`, one instance per worker: its state and lifecycle (accessors,
//! stats, shutdown). The paper's Table 1 calls live beside it, one concern a
//! file: `builder` declares tables and connects, `virtual_iteration` records
//! and plans, `acquire` hands out buffers (fast path from the allocator's
//! prefetches, slow path on the application's thread), `release` takes them
//! back and clocks, `buffers` wraps them as RAII guards. Nothing here moves
//! data itself; that is `engine::access`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use crate::config::Config;
use crate::device::Device;
use crate::engine::index::AccessPlan;
use crate::engine::puller::PullMsg;
use crate::engine::reclaimer::{self, Release};
use crate::engine::write_counts::WriteCounts;
use crate::engine::{Acquired, Shared};
use crate::error::{Error, Result};
use crate::plan::planner::Plan;
use crate::plan::recorder::Recorder;
use crate::stats::Stats;
use crate::table::TableSpec;
use crate::transport::Transport;

mod acquire;
mod buffers;
mod builder;
mod checkpoint_calls;
#[cfg(test)]
mod failure_tests;
mod release;
mod virtual_iteration;

pub use buffers::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
pub use builder::GeepsBuilder;
pub use checkpoint_calls::Restored;
pub use release::ReleaseAs;

enum Phase {
    Recording { recorder: Recorder, pull_rx: Vec<Receiver<PullMsg>> },
    Running,
    ShutDown,
}

impl Phase {
    fn name(&self) -> &'static str {
        match self {
            Phase::Recording { .. } => "recording its virtual iteration",
            Phase::Running => "running",
            Phase::ShutDown => "shut down",
        }
    }
}

struct Running {
    shared: Arc<Shared>,
    plan: Plan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LiveKind {
    Read,
    Update,
    Local,
}

struct Live {
    kind: LiveKind,
    plan: Arc<AccessPlan>,
    acquired: Acquired,
    /// Recorded position of the matching release, when acquired by handle.
    release_at: Option<usize>,
    /// Recorded save flag (true for keyed local accesses).
    save: bool,
}

/// What the application has done so far, in its own order.
struct AppState {
    /// Next recorded position the application is expected to call.
    cursor: usize,
    clocks: Vec<u64>,
    /// Writes (updates, saving local posts) issued per table.
    writes: WriteCounts,
    live: HashMap<u64, Live>,
    next_ticket: u64,
}

/// The reclaimer's queues: parameter releases and local-data saves.
struct Lanes {
    params: Sender<Release>,
    local: Sender<Release>,
}

/// One geeps instance: one worker of a data-parallel job.
pub struct Geeps {
    instance: u32,
    config: Config,
    tables: Arc<[TableSpec]>,
    device: Arc<dyn Device>,
    transport: Arc<dyn Transport>,
    parts: usize,
    phase: Mutex<Phase>,
    running: OnceLock<Running>,
    app: Mutex<AppState>,
    pull_tx: Vec<Sender<PullMsg>>,
    reclaim_tx: Mutex<Option<Lanes>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The deadline of blocking waits, in nanoseconds (see `set_wait_deadline`).
    wait_deadline_ns: AtomicU64,
    /// Releases on drop that failed: logged once per cause, then counted.
    drop_log: Mutex<DropLog>,
    /// The clock of the checkpoint `restore` loaded: the instance's clock 1
    /// (after the clock `restore` ends) is that clock, for the checkpoints
    /// it writes next.
    restored_clock: Mutex<Option<u64>>,
}

/// Failed releases of dropped buffers. A failure or a shutdown makes every
/// buffer dropped afterwards fail the same way: the cause is logged once
/// (or not at all when it is the instance's failure, which `Shared::fail`
/// logged already), the rest are counted and summed up in one line.
#[derive(Default)]
struct DropLog {
    /// The kind of the last cause logged (the same failure or shutdown
    /// reads differently only in the call it names).
    cause: Option<std::mem::Discriminant<Error>>,
    /// Failed releases not logged on their own.
    unlogged: u64,
}

impl Geeps {
    /// How long a blocking call waits before failing with [`Error::Timeout`]
    /// (starts as [`Config::wait_deadline`]).
    pub fn wait_deadline(&self) -> Duration {
        Duration::from_nanos(self.wait_deadline_ns.load(Ordering::Relaxed))
    }

    /// Changes the deadline of blocking calls that start from now on (a
    /// long one for a slow first iteration, a short one afterwards, say).
    /// Calls already waiting keep theirs.
    pub fn set_wait_deadline(&self, deadline: Duration) -> Result<()> {
        if deadline.is_zero() {
            return Err(Error::InvalidConfig {
                field: "wait_deadline",
                reason: "zero; a blocking call needs time to wait".into(),
            });
        }
        self.wait_deadline_ns.store(u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        Ok(())
    }

    /// When a wait starting now gives up (`None`: too far to represent).
    pub(super) fn deadline(&self) -> Option<Instant> {
        Instant::now().checked_add(self.wait_deadline())
    }

    /// Starts declaring an instance.
    pub fn builder(config: Config) -> GeepsBuilder {
        GeepsBuilder::new(config)
    }

    /// This worker's rank in its cluster.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    /// The number of workers in the cluster.
    pub fn num_workers(&self) -> usize {
        self.transport.num_workers()
    }

    /// Floats per row.
    pub fn row_width(&self) -> usize {
        self.config.row_width
    }

    /// The configuration the instance was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The declared tables, indexed by [`TableId`](crate::TableId).
    pub fn tables(&self) -> &[TableSpec] {
        &self.tables
    }

    pub(crate) fn host_addressable(&self) -> bool {
        self.running.get().map(|r| r.shared.host_addressable).unwrap_or(false)
    }

    fn running(&self, call: &'static str) -> Result<&Running> {
        match self.running.get() {
            Some(r) => {
                if let Some(e) = r.shared.failure() {
                    return Err(e);
                }
                if matches!(*self.phase.lock(), Phase::ShutDown) {
                    return Err(Error::InvalidState { call, state: "shut down", hint: "create a new instance" });
                }
                Ok(r)
            }
            None => Err(Error::InvalidState {
                call,
                state: self.phase.lock().name(),
                hint: "call finish_virtual_iteration first (with no virtual calls if you do not record a sequence)",
            }),
        }
    }

    /// The placement plan (after `finish_virtual_iteration`).
    pub fn plan(&self) -> Result<Plan> {
        Ok(self.running("plan")?.plan.clone())
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.running.get().map(|r| r.shared.stats.snapshot()).unwrap_or_default()
    }

    /// Bytes of device memory the access buffer pool has allocated so far:
    /// it grows on demand to what the iteration holds at once (prefetches
    /// included), never above [`Plan::pool_bytes`]; 0 before
    /// `finish_virtual_iteration`.
    pub fn pool_allocated_bytes(&self) -> usize {
        self.running.get().map_or(0, |r| r.shared.pool.allocated())
    }

    /// This worker's clock of parameter table `table`: how many times it has
    /// called `table_clock` on it (0 before the first). A read with slack
    /// `s` at clock `c` sees every worker's updates of the clocks below
    /// `c - s`.
    pub fn current_table_clock(&self, table: crate::TableId) -> Result<u64> {
        self.check_param_table(table)?;
        Ok(self.app.lock().clocks[table.0 as usize])
    }

    /// Whether an operator asked the cluster to drain (geeps-net's admin
    /// endpoint): stop at the next clock boundary, after saving what must
    /// survive (a checkpoint, a snapshot). Always false in process.
    pub fn drain_requested(&self) -> bool {
        self.transport.drain_requested()
    }

    /// How many checkpoints an operator has asked for so far (geeps-net's
    /// admin endpoint, relayed to every rank): when it grows, save a
    /// checkpoint at a clock boundary the workers agree on. Always 0 in
    /// process.
    pub fn checkpoint_requests(&self) -> u64 {
        self.transport.checkpoint_requests()
    }

    /// This worker's clock: the lowest clock of its parameter tables (all
    /// equal when it only calls `clock`); 0 without parameter tables.
    pub fn current_clock(&self) -> u64 {
        let app = self.app.lock();
        self.param_tables().iter().map(|t| app.clocks[t.0 as usize]).min().unwrap_or(0)
    }

    /// The data age of the read buffer released by `ticket` (see
    /// [`RawBuffer::ticket`]): the clock its rows were read at, so every
    /// worker's updates of the clocks below it are included (the lowest
    /// over its tables). `None` for a buffer that is not a read, or holds no
    /// rows; an error if `ticket` is not held.
    pub fn data_age(&self, ticket: u64) -> Result<Option<u64>> {
        let app = self.app.lock();
        let Some(live) = app.live.get(&ticket) else {
            return Err(Error::InvalidHandle(format!(
                "buffer {ticket} is not held: it was already released, or never acquired from this instance"
            )));
        };
        if live.kind != LiveKind::Read {
            return Ok(None);
        }
        Ok(live.acquired.ages.iter().map(|&(_, age)| age).min())
    }

    /// Zeroes the counters and restarts the stall-fraction wall clock.
    pub fn reset_stats(&self) {
        if let Some(r) = self.running.get() {
            r.shared.stats.reset();
        }
    }

    fn send(&self, op: Release) -> Result<()> {
        match self.reclaim_tx.lock().as_ref() {
            Some(lanes) => {
                let tx = if reclaimer::is_local(&op) { &lanes.local } else { &lanes.params };
                tx.send(op).map_err(|_| Error::ShutDown("reclaimer thread has stopped".into()))
            }
            None => Err(Error::ShutDown("instance is shut down".into())),
        }
    }

    /// Stops the background threads and leaves the cluster. Idempotent; also
    /// done on drop. Buffers still held stay valid until the instance drops.
    pub fn shutdown(&self) -> Result<()> {
        {
            let mut phase = self.phase.lock();
            if matches!(*phase, Phase::ShutDown) {
                return Ok(());
            }
            *phase = Phase::ShutDown;
        }
        if let Some(run) = self.running.get() {
            tracing::info!(rank = self.rank(), "geeps stats: {}", run.shared.stats.snapshot());
            // Every call blocked in the engine (from any thread) wakes and
            // returns `Error::ShutDown`.
            run.shared.stop();
        }
        // Closing the reclaimer's queue lets it drain, then closes the pushers'.
        self.reclaim_tx.lock().take();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        let (pullers, others): (Vec<_>, Vec<_>) =
            threads.into_iter().partition(|t| t.thread().name().is_some_and(|n| n.contains("-puller-")));
        let mut panicked = false;
        for t in others {
            panicked |= t.join().is_err();
        }
        self.transport.leave();
        for tx in &self.pull_tx {
            let _ = tx.send(PullMsg::Stop);
        }
        for t in pullers {
            panicked |= t.join().is_err();
        }
        if panicked {
            return Err(Error::ShutDown("a geeps thread panicked; see the log".into()));
        }
        Ok(())
    }
}

impl Geeps {
    /// Notes that releasing a buffer on drop (`what`) failed with `error`:
    /// logged the first time for a cause, counted afterwards.
    pub(crate) fn drop_failed(&self, what: &'static str, error: Error) {
        let mut log = self.drop_log.lock();
        let kind = std::mem::discriminant(&error);
        let already_logged =
            log.cause == Some(kind) || self.running.get().and_then(|r| r.shared.failure()).as_ref() == Some(&error);
        if already_logged {
            log.unlogged += 1;
            tracing::debug!(rank = self.rank(), %error, "{what} on drop failed");
        } else {
            tracing::warn!(
                rank = self.rank(),
                %error,
                "{what} on drop failed; other buffers dropped for the same cause are counted, not logged"
            );
            log.cause = Some(kind);
        }
    }

    /// How many failed releases on drop were counted without a log line of
    /// their own.
    #[cfg(test)]
    pub(crate) fn unlogged_drop_failures(&self) -> u64 {
        self.drop_log.lock().unlogged
    }
}

impl Drop for Geeps {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "geeps shutdown");
        }
        let log = self.drop_log.get_mut();
        if log.unlogged > 0 {
            tracing::info!(
                rank = self.transport.rank(),
                buffers = log.unlogged,
                "buffers dropped after the instance failed or shut down were not released (cause logged above)"
            );
        }
        if let Some(run) = self.running.get() {
            for (_, live) in self.app.get_mut().live.drain() {
                run.shared.discard(live.acquired);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_instance_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::Geeps>();
    }

    #[test]
    fn the_wait_deadline_can_change_between_calls() {
        use std::time::{Duration, Instant};

        use crate::{keys, Config, Error, Geeps, InProcessCluster, Slack};

        // Worker 1 never clocks, so worker 0's BSP read after its clock waits.
        let cluster = InProcessCluster::new(2).unwrap();
        let mut b = Geeps::builder(Config::default().with_row_width(2).with_wait_deadline(Duration::from_secs(300)));
        let w = b.parameter_table("w", 2);
        b.transport(cluster.transport(0).unwrap());
        let ps = b.build().unwrap();
        ps.finish_virtual_iteration().unwrap();
        assert_eq!(ps.wait_deadline(), Duration::from_secs(300));
        assert!(matches!(
            ps.set_wait_deadline(Duration::ZERO),
            Err(Error::InvalidConfig { field: "wait_deadline", .. })
        ));
        assert_eq!(ps.wait_deadline(), Duration::from_secs(300), "a refused deadline changes nothing");
        ps.clock().unwrap();
        ps.set_wait_deadline(Duration::from_millis(200)).unwrap();
        let start = Instant::now();
        match ps.read_keys(&keys(w, 0..2), Slack::BSP) {
            Err(Error::Timeout { waited_ms, .. }) => assert!(waited_ms >= 200, "waited {waited_ms} ms"),
            Err(other) => panic!("expected a timeout, got {other}"),
            Ok(_) => panic!("a BSP read went through without worker 1's clock"),
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the new deadline was not used");
    }
}

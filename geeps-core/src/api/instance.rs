//! `Geeps`, one instance per worker, and the state its calls share: the
//! phase (recording, running, shut down), the running engine and plan, and
//! the application's place in the recorded order with its live buffers.
//! It holds state only; the calls that change it live beside it.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use crate::config::Config;
use crate::device::Device;
use crate::engine::acquired::Acquired;
use crate::engine::index::AccessPlan;
use crate::engine::puller::PullMsg;
use crate::engine::reclaimer::Release;
use crate::engine::shared::Shared;
use crate::engine::write_counts::WriteCounts;
use crate::error::{Error, Result};
use crate::plan::planner::Plan;
use crate::plan::recorder::Recorder;
use crate::table::TableSpec;
use crate::transport::Transport;

pub(super) enum Phase {
    Recording { recorder: Recorder, pull_rx: Vec<Receiver<PullMsg>> },
    Running,
    ShutDown,
}

impl Phase {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Phase::Recording { .. } => "recording its virtual iteration",
            Phase::Running => "running",
            Phase::ShutDown => "shut down",
        }
    }
}

pub(super) struct Running {
    pub(super) shared: Arc<Shared>,
    pub(super) plan: Plan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LiveKind {
    Read,
    Update,
    Local,
}

pub(super) struct Live {
    pub(super) kind: LiveKind,
    pub(super) plan: Arc<AccessPlan>,
    pub(super) acquired: Acquired,
    /// Recorded position of the matching release, when acquired by handle.
    pub(super) release_at: Option<usize>,
    /// Recorded save flag (true for keyed local accesses).
    pub(super) save: bool,
}

/// What the application has done so far, in its own order.
pub(super) struct AppState {
    /// Next recorded position the application is expected to call.
    pub(super) cursor: usize,
    pub(super) clocks: Vec<u64>,
    /// Writes (updates, saving local posts) issued per table.
    pub(super) writes: WriteCounts,
    pub(super) live: HashMap<u64, Live>,
    pub(super) next_ticket: u64,
}

/// The reclaimer's queues: parameter releases and local-data saves.
pub(super) struct Lanes {
    pub(super) params: Sender<Release>,
    pub(super) local: Sender<Release>,
}

/// One geeps instance: one worker of a data-parallel job.
pub struct Geeps {
    pub(super) instance: u32,
    pub(super) config: Config,
    pub(super) tables: Arc<[TableSpec]>,
    pub(super) device: Arc<dyn Device>,
    pub(super) transport: Arc<dyn Transport>,
    pub(super) parts: usize,
    pub(super) phase: Mutex<Phase>,
    pub(super) running: OnceLock<Running>,
    pub(super) app: Mutex<AppState>,
    pub(super) pull_tx: Vec<Sender<PullMsg>>,
    pub(super) reclaim_tx: Mutex<Option<Lanes>>,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
    /// The deadline of blocking waits, in nanoseconds (see `set_wait_deadline`).
    pub(super) wait_deadline_ns: AtomicU64,
    /// Releases on drop that failed: logged once per cause, then counted.
    pub(super) drop_log: Mutex<DropLog>,
    /// The clock of the checkpoint `restore` loaded: the instance's clock 1
    /// (after the clock `restore` ends) is that clock, for the checkpoints
    /// it writes next.
    pub(super) restored_clock: Mutex<Option<u64>>,
}

/// Failed releases of dropped buffers. A failure or a shutdown makes every
/// buffer dropped afterwards fail the same way: the cause is logged once
/// (or not at all when it is the instance's failure, which `Shared::fail`
/// logged already), the rest are counted and summed up in one line.
#[derive(Default)]
pub(super) struct DropLog {
    /// The kind of the last cause logged (the same failure or shutdown
    /// reads differently only in the call it names).
    pub(super) cause: Option<std::mem::Discriminant<Error>>,
    /// Failed releases not logged on their own.
    pub(super) unlogged: u64,
}

impl Geeps {
    /// When a wait starting now gives up (`None`: too far to represent).
    pub(super) fn deadline(&self) -> Option<Instant> {
        Instant::now().checked_add(self.wait_deadline())
    }

    pub(crate) fn host_addressable(&self) -> bool {
        self.running.get().map(|r| r.shared.host_addressable).unwrap_or(false)
    }

    pub(super) fn running(&self, call: &'static str) -> Result<&Running> {
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
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_instance_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::Geeps>();
    }
}

//! The race detector (on unless `GEEPS_CUDA_EMU_RACECHECK=0`): every stream
//! is a lane with a vector clock, and so is the host. Enqueuing stamps an
//! operation with its stream's clock, which has taken in the host's (what
//! the host did before the call happens before the operation); event
//! record and `cuStreamWaitEvent`, the legacy stream's implicit waits, and
//! every synchronisation (stream, event, context, a synchronous copy, a
//! successful query) join clocks along the edge the driver promises. When
//! an operation runs, its bytes are checked against the shadow of each
//! allocation it touches: an earlier access to overlapping bytes, one of
//! the two a write, whose stamp its clock does not cover is a race, whatever
//! the timing. `cuMemFree` (and `cuMemFreeHost`) of memory used by enqueued
//! work the host has not synchronised with is an error too. Both become the
//! context's sticky error with a message naming both operations, their
//! streams and the bytes. Must never block on a stream, nor lock an
//! allocation while holding its state.

mod clock;
mod shadow;
mod touches;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

pub use clock::{Clock, Epoch, Stamp};
use shadow::{Access, Shadow};
pub use touches::{held, touches, Resource};

use crate::config::config;
use crate::ops::Op;

#[derive(Default)]
struct State {
    /// Each lane's clock, by lane.
    lanes: Vec<Clock>,
    /// What the host has synchronised with.
    host: Clock,
    /// Per resource base: the shadow of its bytes.
    shadows: HashMap<u64, Shadow>,
    /// Per resource base: the last enqueued operation of each lane holding it.
    users: HashMap<u64, Vec<Access>>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    fn lane(&mut self, lane: usize) -> &mut Clock {
        if self.lanes.len() <= lane {
            self.lanes.resize(lane + 1, Clock::default());
        }
        &mut self.lanes[lane]
    }
}

/// Whether the detector runs (`GEEPS_CUDA_EMU_RACECHECK`, default on).
pub fn enabled() -> bool {
    config().racecheck
}

/// A fresh lane for a new stream.
pub fn new_lane() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Stamps the next operation of `lane`, recording which resources it holds.
pub fn stamp(lane: usize, op: &Op) -> Option<Stamp> {
    if !enabled() {
        return None;
    }
    let held = held(op);
    let mut s = state();
    let host = std::mem::take(&mut s.host);
    let clock = s.lane(lane);
    clock.join(&host);
    let tick = clock.get(lane) + 1;
    clock.set(lane, tick);
    let stamp = Stamp { epoch: Epoch { lane, tick }, clock: Arc::new(clock.clone()) };
    s.host = host;
    if !held.is_empty() {
        let access = Access { epoch: stamp.epoch, what: describe(op, lane).into() };
        for r in held {
            let users = s.users.entry(r.base).or_default();
            match users.iter_mut().find(|u| u.epoch.lane == lane) {
                Some(u) => *u = access.clone(),
                None => users.push(access.clone()),
            }
        }
    }
    Some(stamp)
}

fn describe(op: &Op, lane: usize) -> String {
    format!("{} on stream #{lane}", op.describe())
}

/// `lane`'s clock as it stands (what an event recorded now captures).
pub fn snapshot(lane: usize) -> Option<Arc<Clock>> {
    enabled().then(|| Arc::new(state().lane(lane).clone()))
}

/// Later work of `lane` happens after everything `clock` knows.
pub fn lane_joins(lane: usize, clock: &Clock) {
    if enabled() {
        state().lane(lane).join(clock);
    }
}

/// Later work of `lane` happens after everything enqueued on `other` so far.
pub fn lane_joins_lane(lane: usize, other: usize) {
    if enabled() && lane != other {
        let mut s = state();
        let theirs = s.lane(other).clone();
        s.lane(lane).join(&theirs);
    }
}

/// The host has waited for everything `clock` knows.
pub fn host_joins(clock: &Clock) {
    if enabled() {
        state().host.join(clock);
    }
}

/// Checks `op`'s bytes against what ran before it, then records them.
/// A race is the reason, naming both operations, their streams and the bytes.
pub fn check(op: &Op, stamp: &Stamp) -> Result<(), String> {
    let touched = touches(op);
    if touched.is_empty() {
        return Ok(());
    }
    let this = describe(op, stamp.epoch.lane);
    let mut s = state();
    for t in &touched {
        let shadow = s.shadows.entry(t.resource.base).or_default();
        if let Some(c) = shadow.check(t.start, t.end, t.write, stamp) {
            return Err(format!(
                "race on bytes {:#x}..{:#x} of {}: {} {} them, and {} {} them, with no ordering between the two \
                 (no event wait, stream or context synchronisation)",
                c.start,
                c.end,
                t.resource,
                this,
                if t.write { "writes" } else { "reads" },
                c.earlier.what,
                if c.earlier_wrote { "wrote" } else { "read" },
            ));
        }
    }
    let access = Access { epoch: stamp.epoch, what: this.into() };
    for t in &touched {
        s.shadows.entry(t.resource.base).or_default().record(t.start, t.end, t.write, &access);
    }
    Ok(())
}

/// The host frees `resource`: an error naming the enqueued work that still
/// uses it unless the host has synchronised with all of it. Forgets its shadow.
pub fn free(resource: Resource, call: &str) -> Result<(), String> {
    if !enabled() {
        return Ok(());
    }
    let mut s = state();
    s.shadows.remove(&resource.base);
    let users = s.users.remove(&resource.base).unwrap_or_default();
    match users.iter().find(|u| !s.host.covers(u.epoch)) {
        Some(u) => Err(format!(
            "{call} of {resource} while {} may still use it (the host has not synchronised with that stream since)",
            u.what
        )),
        None => Ok(()),
    }
}

/// Forgets `base`'s history (its context is gone).
pub fn forget(base: u64) {
    if enabled() {
        let mut s = state();
        s.shadows.remove(&base);
        s.users.remove(&base);
    }
}

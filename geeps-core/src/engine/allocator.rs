//! The allocator thread: walks the recorded sequence ahead of the
//! application, filling buffers for reads, pre-updates and local accesses
//! while the application computes. It predicts the application's clocks and
//! writes from the recording; the application validates every prefetched
//! buffer when it takes it, so a wrong prediction costs time, never
//! correctness. It never blocks the application: its waits have no deadline
//! and are abandoned as soon as the application changes course.
//!
//! A hand-over target (see `plan/handover.rs`) is queued as a place holder: the
//! application takes the buffer its own post at the source left, and the
//! allocator goes on prefetching past it. The carried save is then predicted
//! at the target's release.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::engine::acquired::Prefetched;
use crate::engine::fill::{self, Fill};
use crate::engine::shared::{Shared, WaitPolicy};
use crate::engine::staging::Staging;
use crate::error::Error;
use crate::plan::recorder::OpKind;

pub(crate) fn fill_of(kind: &OpKind) -> Option<Fill> {
    match kind {
        OpKind::Read { slack } => Some(Fill::Read(*slack)),
        OpKind::PreUpdate { zeroed } => Some(Fill::Update { zeroed: *zeroed }),
        OpKind::LocalAccess { fetch } => Some(Fill::Local { fetch: *fetch }),
        _ => None,
    }
}

pub(crate) fn run(sh: Arc<Shared>) {
    let n = sh.ops.len();
    // Nothing to prefetch (no recording, only clocks and releases, or every
    // access served in place): walking the sequence would spin forever
    // without reaching an acquisition.
    if sh.acquires_per_iteration == 0 {
        return;
    }
    let mut staging = Staging::default();
    // Per epoch: targets whose source release this walk has passed (their
    // buffer will be handed over; true when it carries a save), and targets
    // served that way carrying a save (their release saves it).
    let mut walked_epoch = u64::MAX;
    let mut expected: HashMap<usize, bool> = HashMap::new();
    let mut carried: HashSet<usize> = HashSet::new();
    loop {
        // Advance through releases and clocks, stop at the next acquisition.
        let (epoch, position, clocks, writes) = {
            let mut c = sh.control.lock();
            loop {
                if c.shutdown || sh.failure().is_some() {
                    return;
                }
                if c.paused || c.ahead >= sh.acquires_per_iteration {
                    sh.control_cond.wait(&mut c);
                    continue;
                }
                if c.epoch != walked_epoch {
                    walked_epoch = c.epoch;
                    expected.clear();
                    carried.clear();
                }
                let pos = c.cursor;
                let op = &sh.ops[pos];
                match &op.kind {
                    OpKind::TableClock { table } => c.clocks[table.0 as usize] += 1,
                    OpKind::PostLocalAccess { acquire, save, discard } => {
                        let was_carried = carried.remove(acquire);
                        if let Some(target) = sh.handover_to[pos] {
                            expected.insert(target, *save || was_carried);
                        } else if *save || (was_carried && !*discard) {
                            if let Some(plan) = &sh.plans[*acquire] {
                                c.writes.count(plan);
                            }
                        }
                    }
                    OpKind::Update { acquire } => {
                        if let Some(plan) = &sh.plans[*acquire] {
                            c.writes.count(plan);
                        }
                    }
                    OpKind::PostRead { .. } => {}
                    // Served in place: nothing to prefetch; the application
                    // serves it itself (`Geeps::acquire`).
                    _ if sh.served_in_place(pos) => {}
                    _ => {
                        c.ahead += 1;
                        c.cursor = (pos + 1) % n;
                        break (c.epoch, pos, c.clocks.clone(), c.writes.clone());
                    }
                }
                c.cursor = (pos + 1) % n;
            }
        };

        let op = &sh.ops[position];
        let (Some(fill), Some(plan)) = (fill_of(&op.kind), sh.plans[position].as_ref()) else { continue };
        if let Some(carries) = expected.remove(&position) {
            // The application posts the source before it reaches the
            // target, so nothing is waited for here: the allocator goes on.
            let mut c = sh.control.lock();
            if c.epoch == epoch && !c.shutdown {
                c.ready.push_back(Prefetched { position, result: None });
                if carries {
                    carried.insert(position);
                }
                drop(c);
                sh.control_cond.notify_all();
            }
            continue;
        }
        let abort = || {
            if let Some(e) = sh.failure() {
                return Some(e);
            }
            let c = sh.control.lock();
            if c.shutdown || c.epoch != epoch {
                Some(Error::ShutDown("prefetch abandoned".into()))
            } else {
                None
            }
        };
        let result =
            fill::acquire(&sh, fill, plan, &|t| clocks[t], &writes, WaitPolicy::BACKGROUND, &abort, &mut staging);

        let mut c = sh.control.lock();
        if c.epoch == epoch && !c.shutdown {
            c.ready.push_back(Prefetched { position, result: Some(result) });
            // Notified under the lock: the waiting application is queued on
            // the lock and gets it when this thread lets go, instead of
            // waking to race this thread's next turn of the walk for it.
            // (Under BSP that race cost GoogLeNet's iteration boundary
            // several milliseconds on a loaded machine.)
            sh.control_cond.notify_all();
            drop(c);
        } else {
            drop(c);
            if let Ok(acq) = result {
                sh.discard(acq);
            }
        }
    }
}

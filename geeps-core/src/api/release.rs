//! Releasing buffers (`post_read`, `update`, `post_local_access`, by ticket)
//! and clocks: keeps the application's place in the recorded order, hands
//! saved local buffers over, and restarts the allocator when the application
//! leaves the order. Never acquires a buffer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::engine::acquired::Acquired;
use crate::engine::fill;
use crate::engine::index::AccessPlan;
use crate::engine::reclaimer::Release;
use crate::engine::shared::{Shared, WaitPolicy};
use crate::error::{Error, Result};
use crate::plan::recorder::OpKind;
use crate::stats::CallKind;
use crate::table::TableId;

use crate::api::instance::{AppState, Geeps, LiveKind};

/// How [`Geeps::release_raw`] releases a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseAs {
    /// `post_read` of a read buffer.
    PostRead,
    /// `update` of a pre-update buffer.
    Update,
    /// Return a pre-update buffer without applying it.
    Discard,
    /// `post_local_access`; `None` uses the recorded flag (true when keyed).
    /// `post_local_access`; `save: None` uses the recorded flag (true when keyed).
    PostLocal {
        /// Whether to store the rows; `None`: as recorded.
        save: Option<bool>,
    },
    /// `post_local_access` declaring the rows' contents dead: nothing is
    /// saved, not even what an earlier post asked to save and handed over
    /// with the buffer; the rows hold unspecified data until written again.
    DiscardLocal,
}

impl Geeps {
    /// Ends this worker's clock on `table`: its updates go to the keepers.
    pub fn table_clock(&self, table: TableId) -> Result<()> {
        let start = Instant::now();
        let run = self.running("table_clock")?;
        self.check_param_table(table)?;
        let sh = &run.shared;
        let t = table.0 as usize;
        let mut app = self.app.lock();
        let clock = app.clocks[t];
        app.clocks[t] += 1;
        let n = sh.ops.len();
        let in_order = n > 0 && matches!(sh.ops[app.cursor].kind, OpKind::TableClock { table: rt } if rt == table);
        if in_order {
            app.cursor = (app.cursor + 1) % n;
        }
        self.send(Release::Clock { table: t, clock })?;
        if n > 0 && !in_order {
            self.resync(sh, &mut app)?;
        }
        drop(app);
        sh.stats.record_call(CallKind::TableClock, start.elapsed());
        Ok(())
    }

    /// Ends this worker's clock on every parameter table.
    pub fn clock(&self) -> Result<()> {
        for t in self.param_tables() {
            self.table_clock(t)?;
        }
        Ok(())
    }

    /// Restarts the allocator at the application's position with its real state.
    pub(super) fn resync(&self, sh: &Shared, app: &mut AppState) -> Result<()> {
        self.restart_allocator(sh, app, false)
    }

    /// Discards the allocator's work and restarts it at the application's
    /// position, or parks it (`paused`) while the slow path runs. Buffers
    /// carrying a hand-over's save are saved first: the application has left
    /// the order the hand-over was planned for.
    pub(super) fn restart_allocator(&self, sh: &Shared, app: &mut AppState, paused: bool) -> Result<()> {
        let (stale, handed) = {
            let mut c = sh.control.lock();
            // Parked until its new state is set below.
            c.paused = true;
            c.epoch += 1;
            c.ahead = 0;
            let stale: Vec<_> = c.ready.drain(..).collect();
            let handed: Vec<_> = c.handed.drain().collect();
            (stale, handed)
        };
        // Queued prefetches never carry a save: hand-overs wait in `handed`.
        for acq in stale.into_iter().filter_map(|p| p.result.and_then(|r| r.ok())) {
            sh.discard(acq);
        }
        let mut result = Ok(());
        for (target, acq) in handed {
            match sh.plans[target].clone() {
                Some(plan) if acq.carried => result = result.and(self.save_carried(app, plan, acq)),
                _ => sh.discard(acq),
            }
        }
        result = result.and(self.save_held(sh, app));
        {
            let mut c = sh.control.lock();
            c.paused = paused;
            c.cursor = app.cursor;
            c.clocks.clone_from(&app.clocks);
            c.writes.clone_from(&app.writes);
        }
        sh.stats.resyncs.fetch_add(1, Ordering::Relaxed);
        sh.wake_all();
        result
    }

    /// Saves a carried buffer the application no longer holds, as a post would.
    pub(super) fn save_carried(&self, app: &mut AppState, plan: Arc<AccessPlan>, acquired: Acquired) -> Result<()> {
        app.writes.count(&plan);
        self.send(Release::PostLocal { plan, acquired, save: true })
    }

    /// Saves the carried data of buffers the application holds, and waits
    /// until it is stored, so accesses off the recorded order see it. The
    /// buffers stay held; their posts save again only if asked to.
    pub(super) fn save_held(&self, sh: &Shared, app: &mut AppState) -> Result<()> {
        let held: Vec<u64> = app.live.iter().filter(|(_, l)| l.acquired.carried).map(|(t, _)| *t).collect();
        for ticket in held {
            let live = app.live.get_mut(&ticket).expect("listed above");
            live.acquired.carried = false;
            let plan = live.plan.clone();
            // A view of the held buffer: no pool buffer goes back with it.
            let view = Acquired {
                buffer: None,
                outgoing: None,
                reserved: false,
                ptr: live.acquired.ptr,
                floats: live.acquired.floats,
                ages: Vec::new(),
                writes_seen: Vec::new(),
                carried: false,
                pinned: Vec::new(),
            };
            app.writes.count(&plan);
            self.send(Release::PostLocal { plan: plan.clone(), acquired: view, save: true })?;
            let policy = WaitPolicy { deadline: self.deadline(), log: true };
            let mut applied = sh.writes.lock();
            for &t in &plan.tables {
                fill::wait_for_writes(sh, &mut applied, t, app.writes.relevant(t, false), false, policy, &|| {
                    sh.app_abort()
                })?;
            }
        }
        Ok(())
    }

    pub(super) fn set_paused(&self, sh: &Shared, app: &mut AppState, paused: bool) -> Result<()> {
        if sh.ops.is_empty() {
            return Ok(());
        }
        self.restart_allocator(sh, app, paused)
    }

    /// Releases a buffer by ticket (for language bindings; Rust code uses the
    /// guards). A buffer released the wrong way stays held and usable.
    pub fn release_raw(&self, ticket: u64, how: ReleaseAs) -> Result<()> {
        let start = Instant::now();
        let call = match how {
            ReleaseAs::PostRead => CallKind::PostRead,
            ReleaseAs::Update | ReleaseAs::Discard => CallKind::Update,
            ReleaseAs::PostLocal { .. } | ReleaseAs::DiscardLocal => CallKind::PostLocalAccess,
        };
        let run = self.running(call.name())?;
        let sh = &run.shared;
        let mut app = self.app.lock();
        let Some(live) = app.live.remove(&ticket) else {
            return Err(Error::InvalidHandle(format!(
                "buffer {ticket} is not held: it was already released, or never acquired from this instance"
            )));
        };
        let expected = match live.kind {
            LiveKind::Read => "post_read",
            LiveKind::Update => "update (or discard)",
            LiveKind::Local => "post_local_access",
        };
        let ok = matches!(
            (live.kind, how),
            (LiveKind::Read, ReleaseAs::PostRead)
                | (LiveKind::Update, ReleaseAs::Update | ReleaseAs::Discard)
                | (LiveKind::Local, ReleaseAs::PostLocal { .. } | ReleaseAs::DiscardLocal)
        );
        if !ok {
            app.live.insert(ticket, live);
            return Err(Error::InvalidHandle(format!(
                "buffer {ticket} must be released with {expected}, not {}",
                call.name()
            )));
        }
        // "The recorded flag" of a post recorded as a discard is the discard.
        let recorded_discard =
            live.release_at.is_some_and(|r| matches!(sh.ops[r].kind, OpKind::PostLocalAccess { discard: true, .. }));
        let how = if how == (ReleaseAs::PostLocal { save: None }) && recorded_discard {
            ReleaseAs::DiscardLocal
        } else {
            how
        };
        let save = match how {
            ReleaseAs::PostLocal { save } => save.unwrap_or(live.save),
            _ => false,
        };
        let n = sh.ops.len();
        let recorded_as = live.release_at.map(|r| &sh.ops[r].kind);
        let as_recorded = match (recorded_as, how) {
            (Some(OpKind::PostRead { .. }), ReleaseAs::PostRead) | (Some(OpKind::Update { .. }), ReleaseAs::Update) => {
                true
            }
            (Some(OpKind::PostLocalAccess { save: s, discard: false, .. }), ReleaseAs::PostLocal { .. }) => *s == save,
            (Some(OpKind::PostLocalAccess { discard: true, .. }), ReleaseAs::DiscardLocal) => true,
            _ => false,
        };
        let in_order = as_recorded && live.release_at == Some(app.cursor);
        if in_order {
            app.cursor = (app.cursor + 1) % n;
        }
        // A post in the recorded order hands its buffer to the next access of
        // the same rows, where the recording allows it (saving, or unchanged
        // since its fetch); a save travels with it.
        let handover = live
            .release_at
            .and_then(|r| sh.handover_to[r])
            .filter(|_| in_order && live.kind == LiveKind::Local && live.acquired.buffer.is_some());
        if let Some(target) = handover {
            let mut acquired = live.acquired;
            acquired.carried |= save;
            sh.control.lock().handed.insert(target, acquired);
            sh.control_cond.notify_all();
        } else {
            // A carried save is done by whichever post ends the chain,
            // unless that post declares the rows dead.
            let save = save || (live.acquired.carried && how != ReleaseAs::DiscardLocal);
            let writes = how == ReleaseAs::Update || (live.kind == LiveKind::Local && save);
            if writes {
                app.writes.count(&live.plan);
            }
            let op = match how {
                ReleaseAs::PostRead | ReleaseAs::Discard => Release::PostRead(live.acquired),
                ReleaseAs::Update => Release::Update(live.plan, live.acquired),
                ReleaseAs::PostLocal { .. } | ReleaseAs::DiscardLocal => {
                    Release::PostLocal { plan: live.plan, acquired: live.acquired, save }
                }
            };
            self.send(op)?;
        }
        if n > 0 && !in_order {
            if let Some(r) = live.release_at.filter(|_| as_recorded) {
                app.cursor = (r + 1) % n;
            }
            self.resync(sh, &mut app)?;
        }
        drop(app);
        sh.stats.record_call(call, start.elapsed());
        Ok(())
    }
}

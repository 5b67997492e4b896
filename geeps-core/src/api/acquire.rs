//! Acquiring buffers (`read`, `pre_update`, `local_access`, by handle or by
//! keys): takes the allocator's prefetch when it is valid for the call as
//! made, serves everything else on the application's thread (the slow path),
//! and registers what the application holds. Never releases a buffer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::engine::acquired::Acquired;
use crate::engine::allocator::fill_of;
use crate::engine::fill::{self, Fill};
use crate::engine::index::{self, AccessPlan};
use crate::engine::shared::{Shared, WaitPolicy};
use crate::engine::staging::Staging;
use crate::engine::write_counts::WriteCounts;
use crate::error::{Error, Result};
use crate::plan::recorder::{Handle, OpKind};
use crate::stats::CallKind;
use crate::table::{RowKey, Slack, TableKind};

use crate::api::buffers::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
use crate::api::instance::{AppState, Geeps, Live, LiveKind};

impl Geeps {
    /// `read` by recorded handle: rows fresh enough for the recorded slack.
    pub fn read(&self, h: Handle) -> Result<ReadBuffer<'_>> {
        let raw = self.acquire_by_handle(h, "read", CallKind::Read)?;
        Ok(ReadBuffer { ps: self, raw })
    }

    /// `read` of keys that were not recorded (slow path).
    pub fn read_keys(&self, keys: &[RowKey], slack: Slack) -> Result<ReadBuffer<'_>> {
        index::validate_keys(&self.tables, keys, TableKind::Parameter, "read")?;
        let raw = self.acquire_by_keys(keys, Fill::Read(slack), CallKind::Read)?;
        Ok(ReadBuffer { ps: self, raw })
    }

    /// `pre_update` by recorded handle: a zeroed buffer for deltas.
    pub fn pre_update(&self, h: Handle) -> Result<UpdateBuffer<'_>> {
        let raw = self.acquire_by_handle(h, "pre_update", CallKind::PreUpdate)?;
        Ok(UpdateBuffer { ps: self, raw })
    }

    /// `pre_update` of keys that were not recorded (slow path).
    pub fn pre_update_keys(&self, keys: &[RowKey]) -> Result<UpdateBuffer<'_>> {
        index::validate_keys(&self.tables, keys, TableKind::Parameter, "pre_update")?;
        let raw = self.acquire_by_keys(keys, Fill::Update { zeroed: true }, CallKind::PreUpdate)?;
        Ok(UpdateBuffer { ps: self, raw })
    }

    /// `local_access` by recorded handle.
    pub fn local_access(&self, h: Handle) -> Result<LocalBuffer<'_>> {
        let raw = self.acquire_by_handle(h, "local_access", CallKind::LocalAccess)?;
        Ok(LocalBuffer { ps: self, raw })
    }

    /// `local_access` of keys that were not recorded (slow path).
    pub fn local_access_keys(&self, keys: &[RowKey], fetch: bool) -> Result<LocalBuffer<'_>> {
        index::validate_keys(&self.tables, keys, TableKind::Local, "local_access")?;
        let raw = self.acquire_by_keys(keys, Fill::Local { fetch }, CallKind::LocalAccess)?;
        Ok(LocalBuffer { ps: self, raw })
    }

    pub(super) fn register(
        &self,
        app: &mut AppState,
        kind: LiveKind,
        plan: Arc<AccessPlan>,
        acquired: Acquired,
        release_at: Option<usize>,
        save: bool,
    ) -> RawBuffer {
        let ticket = app.next_ticket;
        app.next_ticket += 1;
        let raw = RawBuffer { ticket, ptr: acquired.ptr, floats: acquired.floats };
        if let (false, Some(run)) = (acquired.pinned.is_empty(), self.running.get()) {
            run.shared.stats.reads_in_place.fetch_add(1, Ordering::Relaxed);
        }
        app.live.insert(ticket, Live { kind, plan, acquired, release_at, save });
        raw
    }

    pub(super) fn acquire_by_handle(&self, h: Handle, want: &'static str, call: CallKind) -> Result<RawBuffer> {
        let start = Instant::now();
        let run = self.running(want)?;
        let sh = &run.shared;
        let pos = self.own(h)?;
        let Some(op) = sh.ops.get(pos) else {
            return Err(Error::InvalidHandle(format!(
                "handle {pos} was not recorded (the sequence has {} calls)",
                sh.ops.len()
            )));
        };
        if op.kind.name() != want {
            return Err(Error::InvalidHandle(format!(
                "{want} needs a handle recorded by virtual_{want}; handle {pos} is a {}",
                op.kind.name()
            )));
        }
        let (Some(fill), Some(plan)) = (fill_of(&op.kind), sh.plans[pos].clone()) else {
            return Err(Error::InvalidHandle(format!("handle {pos} is not an acquisition")));
        };
        let n = sh.ops.len();
        let (clocks, writes) = {
            let mut app = self.app.lock();
            if app.cursor != pos {
                app.cursor = pos;
                self.resync(sh, &mut app)?;
            }
            app.cursor = (pos + 1) % n;
            (app.clocks.clone(), app.writes.clone())
        };
        let save = matches!(sh.ops[op.release.unwrap_or(pos)].kind, OpKind::PostLocalAccess { save: true, .. });
        let kind = live_kind(fill);
        if sh.served_in_place(pos) {
            // No buffer to fill: only earlier writes into these rows to wait for.
            let policy = WaitPolicy { deadline: self.deadline(), log: true };
            let acquired = fill::acquire(
                sh,
                fill,
                &plan,
                &|t| clocks[t],
                &writes,
                policy,
                &|| sh.app_abort(),
                &mut Staging::default(),
            )?;
            sh.stats.prefetch_hits.fetch_add(1, Ordering::Relaxed);
            let raw = self.register(&mut self.app.lock(), kind, plan, acquired, op.release, save);
            sh.stats.record_call(call, start.elapsed());
            return Ok(raw);
        }
        let taken = self.take_prefetched(sh, pos, &clocks);
        let acquired = match taken {
            // A handed-over buffer holds every write to its rows by construction.
            Ok(Some((acq, handed))) if handed || valid(sh, fill, &acq, &clocks, &writes) => {
                sh.stats.prefetch_hits.fetch_add(1, Ordering::Relaxed);
                if handed {
                    sh.stats.handovers.fetch_add(1, Ordering::Relaxed);
                }
                acq
            }
            Ok(stale) => {
                let stale = stale.map(|(acq, _)| acq);
                if let Some(acq) = stale {
                    sh.discard(acq);
                }
                self.acquire_now(sh, fill, &plan, &clocks)?
            }
            Err(e) => return Err(e),
        };
        let raw = self.register(&mut self.app.lock(), kind, plan, acquired, op.release, save);
        sh.stats.record_call(call, start.elapsed());
        Ok(raw)
    }

    /// Waits for the allocator's buffer for `pos`; true with a buffer handed
    /// over by the application's own post.
    pub(super) fn take_prefetched(&self, sh: &Shared, pos: usize, clocks: &[u64]) -> Result<Option<(Acquired, bool)>> {
        let mut c = sh.control.lock();
        let policy = WaitPolicy { deadline: self.deadline(), log: true };
        let abort = || sh.app_abort();
        let describe = |_: &crate::engine::shared::Control| self.diagnose(sh, pos, clocks);
        sh.wait(&mut c, &sh.control_cond, policy, |c| !c.ready.is_empty(), &abort, &describe)?;
        let Some(p) = c.ready.pop_front() else { return Ok(None) };
        c.ahead = c.ahead.saturating_sub(1);
        let result = match p.result {
            Some(r) => Some(r.map(|acq| (acq, false))),
            // A hand-over target: the buffer this application's post left.
            None if p.position == pos => c.handed.remove(&pos).map(|acq| Ok((acq, true))),
            None => None,
        };
        drop(c);
        sh.control_cond.notify_all();
        if p.position != pos {
            if let Some(Ok((acq, _))) = result {
                sh.discard(acq);
            }
            return Ok(None);
        }
        result.transpose()
    }

    /// Says what the prefetch of `pos` is waiting for. Never blocks on a
    /// partition lock (the caller may hold the control lock).
    pub(super) fn diagnose(&self, sh: &Shared, pos: usize, clocks: &[u64]) -> String {
        let op = &sh.ops[pos];
        let mut why = Vec::new();
        if let (OpKind::Read { slack }, Some(plan)) = (&op.kind, &sh.plans[pos]) {
            for g in &plan.groups {
                if let crate::engine::index::Target::Param { table, part } = g.target {
                    let Some(required) = slack.required_age(clocks[table]) else { continue };
                    let p = &sh.stores.params[table].as_ref().map(|v| &v[part]);
                    if let Some(st) = p.and_then(|p| p.state.try_lock()) {
                        if st.age < required {
                            why.push(format!(
                                "table `{}` partition {part} is at data age {} and needs {required}: {}",
                                sh.tables[table].name,
                                st.age,
                                fill::behind(&st.included, sh.rank)
                            ));
                        }
                    }
                }
            }
        }
        let (held, count) = sh.pool.held();
        if why.is_empty() {
            why.push(format!("access buffer pool has {held} of {} bytes held in {count} buffers", sh.pool.capacity()));
        }
        format!("{} at recorded position {pos}: {}", op.kind.name(), why.join("; "))
    }

    /// Serves an acquisition synchronously on the application's thread.
    pub(super) fn acquire_now(&self, sh: &Shared, fill: Fill, plan: &AccessPlan, clocks: &[u64]) -> Result<Acquired> {
        sh.stats.slow_path.fetch_add(1, Ordering::Relaxed);
        let policy = WaitPolicy { deadline: self.deadline(), log: true };
        let abort = || sh.app_abort();
        // Pausing saves carried hand-overs, which the access must see.
        let writes = {
            let mut app = self.app.lock();
            self.set_paused(sh, &mut app, true)?;
            app.writes.clone()
        };
        let mut staging = Staging::default();
        let result = fill::acquire(sh, fill, plan, &|t| clocks[t], &writes, policy, &abort, &mut staging);
        let resumed = self.set_paused(sh, &mut self.app.lock(), false);
        let acquired = result?;
        if let Err(e) = resumed {
            sh.discard(acquired);
            return Err(e);
        }
        Ok(acquired)
    }

    pub(super) fn acquire_by_keys(&self, keys: &[RowKey], fill: Fill, call: CallKind) -> Result<RawBuffer> {
        let start = Instant::now();
        let run = self.running(call.name())?;
        let sh = &run.shared;
        let plan = Arc::new(index::build(
            &self.device,
            &self.tables,
            &sh.stores,
            self.parts,
            keys,
            None,
            self.config.row_width,
        )?);
        let clocks = self.app.lock().clocks.clone();
        let acquired = self.acquire_now(sh, fill, &plan, &clocks)?;
        let raw = self.register(&mut self.app.lock(), live_kind(fill), plan, acquired, None, true);
        sh.stats.record_call(call, start.elapsed());
        Ok(raw)
    }
}

fn live_kind(fill: Fill) -> LiveKind {
    match fill {
        Fill::Read(_) => LiveKind::Read,
        Fill::Update { .. } => LiveKind::Update,
        Fill::Local { .. } => LiveKind::Local,
    }
}

/// Whether a prefetched buffer satisfies the call as actually made.
fn valid(sh: &Shared, fill: Fill, acq: &Acquired, clocks: &[u64], writes: &WriteCounts) -> bool {
    if let Fill::Read(slack) = fill {
        for &(t, age) in &acq.ages {
            if slack.required_age(clocks[t]).is_some_and(|r| age < r) {
                return false;
            }
        }
    }
    let in_place = acq.on_stored_rows();
    if !fill::orders_after_writes(fill, in_place, sh.config.read_my_writes) {
        return true;
    }
    acq.writes_seen.iter().all(|&(t, seen)| seen >= writes.relevant(t, in_place))
}

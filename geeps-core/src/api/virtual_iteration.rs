//! The virtual iteration: records the application's calls once, then
//! `finish_virtual_iteration` plans placement, builds the indexes, sizes the
//! pool and starts the background threads. Never serves a real call.

use std::sync::Arc;

use crossbeam_channel::{unbounded, Receiver};

use crate::device::Device;
use crate::engine::allocator::{self};
use crate::engine::index::{self, AccessPlan};
use crate::engine::puller::{self, PullMsg};
use crate::engine::pusher;
use crate::engine::reclaimer::{self, Pushers};
use crate::engine::shared::Shared;
use crate::engine::store::{Layout, LocalRegion, ParamPartition, Stores};
use crate::error::{Error, Result};
use crate::plan::planner::{self, Plan};
use crate::plan::recorder::{Handle, OpKind, RecordedOp, Recorder};
use crate::table::{partition_range, RowKey, Slack, TableId, TableKind, TableSpec};
use crate::transport::Landing;

use crate::api::instance::{Geeps, Lanes, Phase, Running};

impl Geeps {
    pub(super) fn record<R>(&self, call: &'static str, f: impl FnOnce(&mut Recorder) -> Result<R>) -> Result<R> {
        let mut phase = self.phase.lock();
        match &mut *phase {
            Phase::Recording { recorder, .. } => f(recorder),
            other => Err(Error::InvalidState {
                call,
                state: other.name(),
                hint: "virtual calls are recorded before finish_virtual_iteration",
            }),
        }
    }

    pub(super) fn handle(&self, position: usize) -> Handle {
        Handle { instance: self.instance, position: position as u32 }
    }

    pub(super) fn own(&self, h: Handle) -> Result<usize> {
        if h.instance != self.instance {
            return Err(Error::InvalidHandle(format!(
                "handle {} belongs to instance {}, not to this instance ({})",
                h.position, h.instance, self.instance
            )));
        }
        Ok(h.position as usize)
    }

    /// Records a `read` of `keys` with staleness bound `slack`.
    pub fn virtual_read(&self, keys: &[RowKey], slack: Slack) -> Result<Handle> {
        index::validate_keys(&self.tables, keys, TableKind::Parameter, "read")?;
        let pos = self.record("virtual_read", |r| Ok(r.acquire(OpKind::Read { slack }, Arc::from(keys))))?;
        Ok(self.handle(pos))
    }

    /// Records the `post_read` of the read `read`.
    pub fn virtual_post_read(&self, read: Handle) -> Result<Handle> {
        let a = self.own(read)?;
        let pos = self.record("virtual_post_read", |r| r.release(a, OpKind::PostRead { acquire: a }, "read"))?;
        Ok(self.handle(pos))
    }

    /// Records a `pre_update` of `keys`: its buffer comes zeroed, for the
    /// application to add its deltas into.
    pub fn virtual_pre_update(&self, keys: &[RowKey]) -> Result<Handle> {
        self.record_pre_update("virtual_pre_update", keys, true)
    }

    /// Records a `pre_update` of `keys` whose buffer the application
    /// overwrites whole before `update`: it comes with unspecified contents
    /// instead of zeros, which spares a pass over every byte of it. Any
    /// value left unwritten is sent as a delta.
    pub fn virtual_pre_update_overwrite(&self, keys: &[RowKey]) -> Result<Handle> {
        self.record_pre_update("virtual_pre_update_overwrite", keys, false)
    }

    fn record_pre_update(&self, call: &'static str, keys: &[RowKey], zeroed: bool) -> Result<Handle> {
        index::validate_keys(&self.tables, keys, TableKind::Parameter, "pre_update")?;
        let pos = self.record(call, |r| Ok(r.acquire(OpKind::PreUpdate { zeroed }, Arc::from(keys))))?;
        Ok(self.handle(pos))
    }

    /// Records the `update` of the pre-update `pre_update`.
    pub fn virtual_update(&self, pre_update: Handle) -> Result<Handle> {
        let a = self.own(pre_update)?;
        let pos = self.record("virtual_update", |r| r.release(a, OpKind::Update { acquire: a }, "pre_update"))?;
        Ok(self.handle(pos))
    }

    /// Records a `local_access` of `keys`; `fetch = false` skips loading them.
    pub fn virtual_local_access(&self, keys: &[RowKey], fetch: bool) -> Result<Handle> {
        index::validate_keys(&self.tables, keys, TableKind::Local, "local_access")?;
        let pos =
            self.record("virtual_local_access", |r| Ok(r.acquire(OpKind::LocalAccess { fetch }, Arc::from(keys))))?;
        Ok(self.handle(pos))
    }

    /// Records the `post_local_access` of `access`; `save = false` skips
    /// storing: for data the application did not change, or that is
    /// overwritten before it is read again. Changes made to a buffer posted
    /// with `save = false` may still reach the store (rows served in place,
    /// a hand-over's carried save) or the next access of the same rows (a
    /// fetched buffer handed over unchanged): see `docs/architecture.md`.
    pub fn virtual_post_local_access(&self, access: Handle, save: bool) -> Result<Handle> {
        let a = self.own(access)?;
        let pos = self.record("virtual_post_local_access", |r| {
            r.release(a, OpKind::PostLocalAccess { acquire: a, save, discard: false }, "local_access")
        })?;
        Ok(self.handle(pos))
    }

    /// Records a `post_local_access` of `access` that declares its rows'
    /// contents dead (see [`crate::LocalBuffer::discard`]).
    pub fn virtual_discard_local_access(&self, access: Handle) -> Result<Handle> {
        let a = self.own(access)?;
        let pos = self.record("virtual_discard_local_access", |r| {
            r.release(a, OpKind::PostLocalAccess { acquire: a, save: false, discard: true }, "local_access")
        })?;
        Ok(self.handle(pos))
    }

    pub(super) fn check_param_table(&self, table: TableId) -> Result<()> {
        match self.tables.get(table.0 as usize) {
            None => Err(Error::UnknownTable { table: table.0, declared: self.tables.len() }),
            Some(t) if t.kind == TableKind::Local => Err(Error::InvalidKeys(format!(
                "table `{}` is a local table; only parameter tables have clocks",
                t.name
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Records a `table_clock` of `table`.
    pub fn virtual_table_clock(&self, table: TableId) -> Result<Handle> {
        self.check_param_table(table)?;
        let pos = self.record("virtual_table_clock", |r| Ok(r.clock(table)))?;
        Ok(self.handle(pos))
    }

    /// Records a `table_clock` of every parameter table.
    pub fn virtual_clock(&self) -> Result<()> {
        for t in self.param_tables() {
            self.virtual_table_clock(t)?;
        }
        Ok(())
    }

    pub(super) fn param_tables(&self) -> Vec<TableId> {
        (0..self.tables.len() as u32)
            .map(TableId)
            .filter(|t| self.tables[t.0 as usize].kind == TableKind::Parameter)
            .collect()
    }

    /// Ends the virtual iteration: plans placement, builds the indexes, sizes
    /// the buffer pool and starts the background threads. Call it (with no
    /// virtual calls at all, if you do not record) before any real call.
    ///
    /// ```
    /// use geeps_core::{keys, Config, Geeps, Slack};
    ///
    /// let mut b = Geeps::builder(Config::default().with_row_width(8).with_device_memory(1 << 20));
    /// let w = b.parameter_table("w", 16);
    /// let ps = b.build()?;
    /// // One iteration as the application will run it, recorded, not executed.
    /// let read = ps.virtual_read(&keys(w, 0..16), Slack::BSP)?;
    /// ps.virtual_post_read(read)?;
    /// ps.virtual_clock()?;
    /// ps.finish_virtual_iteration()?;
    /// let plan = ps.plan()?; // where each table's rows live, the pool's size
    /// assert_eq!(plan.tables[0].rows_on_device, 16);
    /// // A second finish is refused with what to do instead.
    /// assert!(ps.finish_virtual_iteration().is_err());
    /// # Ok::<(), geeps_core::Error>(())
    /// ```
    pub fn finish_virtual_iteration(&self) -> Result<()> {
        let mut phase = self.phase.lock();
        let (recorder, pull_rx) = match std::mem::replace(&mut *phase, Phase::Running) {
            Phase::Recording { recorder, pull_rx } => (recorder, pull_rx),
            other => {
                let state = other.name();
                *phase = other;
                return Err(Error::InvalidState {
                    call: "finish_virtual_iteration",
                    state,
                    hint: "it may be called once, after the virtual calls",
                });
            }
        };
        match self.start(recorder, pull_rx) {
            Ok(()) => Ok(()),
            Err((e, recorder, pull_rx)) => {
                *phase = Phase::Recording { recorder, pull_rx };
                Err(e)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn start(
        &self,
        recorder: Recorder,
        pull_rx: Vec<Receiver<PullMsg>>,
    ) -> Result<(), (Error, Recorder, Vec<Receiver<PullMsg>>)> {
        // On failure the recording is handed back intact, so it can be fixed and finished again.
        if let Err(e) = recorder.check() {
            return Err((e, recorder, pull_rx));
        }
        match self.build_shared(recorder.ops.clone()) {
            Ok((shared, plan)) => {
                self.spawn(shared.clone(), pull_rx).map_err(|e| (e, Recorder::default(), Vec::new()))?;
                shared.stats.reset();
                // A weak reference: the transport must not keep a shut-down instance alive.
                let weak = Arc::downgrade(&shared);
                self.transport
                    .attach_stats(Arc::new(move || weak.upgrade().map(|s| s.stats.snapshot()).unwrap_or_default()));
                if let Some(landing) = &shared.landing {
                    self.transport.attach_landing(landing.clone());
                }
                tracing::info!(rank = self.rank(), "geeps placement plan:\n{plan}");
                let _ = self.running.set(Running { shared, plan });
                Ok(())
            }
            Err(e) => Err((e, recorder, pull_rx)),
        }
    }

    pub(super) fn build_shared(&self, ops: Vec<crate::plan::recorder::RecordedOp>) -> Result<(Arc<Shared>, Plan)> {
        let width = self.config.row_width;
        let budget = self.config.device_memory.min(self.device.info().capacity);
        let placement = planner::plan(&ops, &self.tables, width, budget)?;
        let workers = self.transport.num_workers();
        let mut params = Vec::with_capacity(self.tables.len());
        let mut locals = Vec::with_capacity(self.tables.len());
        for (t, spec) in self.tables.iter().enumerate() {
            match spec.kind {
                TableKind::Parameter => {
                    let mut parts = Vec::with_capacity(self.parts);
                    for p in 0..self.parts {
                        let range = partition_range(spec.rows, self.parts, p);
                        let on_device: Vec<u32> = range
                            .clone()
                            .filter(|r| placement.on_device[t][*r as usize])
                            .map(|r| r - range.start)
                            .collect();
                        let layout = Layout::new(range.start, range.len() as u32, on_device);
                        parts.push(ParamPartition::new(&self.device, layout, width, workers)?);
                    }
                    params.push(Some(parts));
                    locals.push(None);
                }
                TableKind::Local => {
                    let layout = Layout::new(0, spec.rows, placement.local_device_order[t].clone());
                    locals.push(Some(LocalRegion::new(&self.device, layout, width)?));
                    params.push(None);
                }
            }
        }
        let stores = Stores { params, locals };
        let mut plans = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            plans.push(if op.kind.is_acquire() {
                Some(Arc::new(index::build(
                    &self.device,
                    &self.tables,
                    &stores,
                    self.parts,
                    &op.keys,
                    placement.in_place[i],
                    width,
                )?))
            } else {
                None
            });
        }
        let landing = landing_for(&self.device, &self.tables, &ops, &plans, self.parts, width);
        let mut handover_to = vec![None; ops.len()];
        for h in &placement.handovers {
            handover_to[h.release] = Some(h.target);
        }
        let shared = Shared::new(
            self.config.clone(),
            self.device.clone(),
            self.transport.rank(),
            self.tables.clone(),
            stores,
            ops,
            plans,
            handover_to,
            placement.plan.pool_bytes,
            self.parts,
            landing,
        )?;
        Ok((Arc::new(shared), placement.plan))
    }

    pub(super) fn spawn(&self, sh: Arc<Shared>, pull_rx: Vec<Receiver<PullMsg>>) -> Result<()> {
        let rank = self.rank();
        let mut threads = self.threads.lock();
        for (p, rx) in pull_rx.into_iter().enumerate() {
            let s = sh.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("geeps{rank}-puller-{p}"))
                    .spawn(move || puller::run(s, rx))?,
            );
        }
        let pushers = if self.transport.push_only_queues() {
            Pushers::Direct(self.transport.clone())
        } else {
            let mut push_tx = Vec::new();
            for p in 0..self.parts {
                let (tx, rx) = unbounded();
                push_tx.push(tx);
                let (s, t) = (sh.clone(), self.transport.clone());
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("geeps{rank}-pusher-{p}"))
                        .spawn(move || pusher::run(s, t, rx))?,
                );
            }
            Pushers::Threads(push_tx)
        };
        let (tx, rx) = unbounded();
        let (local_tx, local_rx) = unbounded();
        *self.reclaim_tx.lock() = Some(Lanes { params: tx, local: local_tx });
        let (s, stream) = (sh.clone(), sh.reclaim_stream);
        threads.push(
            std::thread::Builder::new()
                .name(format!("geeps{rank}-reclaimer"))
                .spawn(move || reclaimer::run(s, rx, pushers, stream))?,
        );
        let (s, stream) = (sh.clone(), sh.local_stream);
        threads.push(
            std::thread::Builder::new()
                .name(format!("geeps{rank}-reclaimer-local"))
                .spawn(move || reclaimer::run(s, local_rx, Pushers::None, stream))?,
        );
        let s = sh;
        threads
            .push(std::thread::Builder::new().name(format!("geeps{rank}-allocator")).spawn(move || allocator::run(s))?);
        Ok(())
    }
}

/// A landing for the parameter tables some recorded read takes consecutive
/// rows of across partitions (served in place once they land side by side),
/// where reads are served from host memory; `None` when there are none.
fn landing_for(
    device: &Arc<dyn Device>,
    tables: &[TableSpec],
    ops: &[RecordedOp],
    plans: &[Option<Arc<AccessPlan>>],
    parts: usize,
    width: usize,
) -> Option<Landing> {
    if !device.info().host_addressable || !cfg!(target_endian = "little") {
        return None;
    }
    let mut lands = vec![false; tables.len()];
    for (op, plan) in ops.iter().zip(plans) {
        let Some(plan) = plan.as_ref().filter(|p| matches!(op.kind, OpKind::Read { .. }) && p.groups.len() > 1) else {
            continue;
        };
        if let Some((t, _)) = plan.run {
            lands[t] = true;
        }
    }
    lands.iter().any(|&l| l).then(|| Landing::for_tables(tables, &lands, parts, width))
}

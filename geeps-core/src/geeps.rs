//! `Geeps`, one instance per worker: tables, the virtual iteration, the
//! paper's Table 1 calls, stats and shutdown. It tracks where the application
//! is in the recorded sequence, takes prefetched buffers on the fast path and
//! serves everything else on the slow path. It does no data movement itself;
//! that is `engine::access`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::buffers::{LocalBuffer, RawBuffer, ReadBuffer, UpdateBuffer};
use crate::config::Config;
use crate::device::host::HostDevice;
use crate::device::Device;
use crate::engine::access::{self, Fill, Staging};
use crate::engine::allocator::{self, fill_of};
use crate::engine::puller::{self, PullMsg};
use crate::engine::reclaimer::{self, Pushers, Release};
use crate::engine::write_counts::WriteCounts;
use crate::engine::{pusher, Acquired, Shared, WaitPolicy};
use crate::error::{Error, Result};
use crate::index::{self, AccessPlan};
use crate::planner::{self, Plan};
use crate::recorder::{Handle, OpKind, Recorder};
use crate::stats::{CallKind, Stats};
use crate::store::{Layout, LocalRegion, ParamPartition, Stores};
use crate::table::{partition_range, RowKey, Slack, TableId, TableKind, TableSpec};
use crate::transport::in_process::InProcessCluster;
use crate::transport::{Inbound, Inbox, Transport};

static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

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
    PostLocal { save: Option<bool> },
    /// `post_local_access` declaring the rows' contents dead: nothing is
    /// saved, not even what an earlier post asked to save and handed over
    /// with the buffer; the rows hold unspecified data until written again.
    DiscardLocal,
}

/// Declares tables and connects an instance.
pub struct GeepsBuilder {
    config: Config,
    tables: Vec<TableSpec>,
    device: Option<Arc<dyn Device>>,
    transport: Option<Arc<dyn Transport>>,
}

impl GeepsBuilder {
    pub fn new(config: Config) -> Self {
        GeepsBuilder { config, tables: Vec::new(), device: None, transport: None }
    }

    /// Declares a parameter table of `rows` rows.
    pub fn parameter_table(&mut self, name: &str, rows: u32) -> TableId {
        self.table(name, TableKind::Parameter, rows)
    }

    /// Declares a local table of `rows` rows.
    pub fn local_table(&mut self, name: &str, rows: u32) -> TableId {
        self.table(name, TableKind::Local, rows)
    }

    fn table(&mut self, name: &str, kind: TableKind, rows: u32) -> TableId {
        self.tables.push(TableSpec { name: name.to_string(), kind, rows });
        TableId(self.tables.len() as u32 - 1)
    }

    /// The device to keep rows on (default: a host device with the budget).
    pub fn device(&mut self, device: Arc<dyn Device>) -> &mut Self {
        self.device = Some(device);
        self
    }

    /// The cluster connection (default: a single-worker in-process cluster).
    pub fn transport(&mut self, transport: Arc<dyn Transport>) -> &mut Self {
        self.transport = Some(transport);
        self
    }

    pub fn build(self) -> Result<Geeps> {
        self.config.validate()?;
        for (i, t) in self.tables.iter().enumerate() {
            if t.rows == 0 {
                return Err(Error::InvalidConfig { field: "tables", reason: format!("table `{}` has 0 rows", t.name) });
            }
            if t.rows >= 1 << 31 {
                return Err(Error::InvalidConfig {
                    field: "tables",
                    reason: format!("table `{}` has more than 2^31 rows", t.name),
                });
            }
            if self.tables[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::InvalidConfig {
                    field: "tables",
                    reason: format!("table name `{}` is declared twice", t.name),
                });
            }
        }
        let device = match self.device {
            Some(d) => d,
            None => Arc::new(HostDevice::new(self.config.device_memory)),
        };
        let transport = match self.transport {
            Some(t) => t,
            None => InProcessCluster::new(1)?.transport(0)?,
        };
        let parts = transport.num_shards();
        if parts == 0 {
            return Err(Error::InvalidConfig { field: "transport", reason: "it reports 0 keeper shards".into() });
        }
        let (pull_tx, pull_rx): (Vec<_>, Vec<_>) = (0..parts).map(|_| unbounded::<PullMsg>()).unzip();
        let route = pull_tx.clone();
        let inbox: Inbox = Arc::new(move |msg: Inbound| {
            let part = match &msg {
                Inbound::Rows(p) => p.partition as usize,
                Inbound::Failed(_) => 0,
            };
            let msg = match msg {
                Inbound::Rows(p) if part >= route.len() => Inbound::Failed(Error::Mismatch(format!(
                    "publication for partition {} of {} partitions",
                    p.partition,
                    route.len()
                ))),
                m => m,
            };
            let _ = route[part.min(route.len() - 1)].send(PullMsg::Inbound(msg));
        });
        let tables: Arc<[TableSpec]> = Arc::from(self.tables);
        transport.join(self.config.row_width, &tables, inbox)?;
        let app = AppState {
            cursor: 0,
            clocks: vec![0; tables.len()],
            writes: WriteCounts::new(tables.len()),
            live: HashMap::new(),
            next_ticket: 1,
        };
        Ok(Geeps {
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            config: self.config,
            tables,
            device,
            transport,
            parts,
            phase: Mutex::new(Phase::Recording { recorder: Recorder::default(), pull_rx }),
            running: OnceLock::new(),
            app: Mutex::new(app),
            pull_tx,
            reclaim_tx: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
        })
    }
}

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
}

impl Geeps {
    /// Starts declaring an instance.
    pub fn builder(config: Config) -> GeepsBuilder {
        GeepsBuilder::new(config)
    }

    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    pub fn num_workers(&self) -> usize {
        self.transport.num_workers()
    }

    pub fn row_width(&self) -> usize {
        self.config.row_width
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn tables(&self) -> &[TableSpec] {
        &self.tables
    }

    pub(crate) fn host_addressable(&self) -> bool {
        self.running.get().map(|r| r.shared.host_addressable).unwrap_or(false)
    }

    // ---------------------------------------------------------------- virtual

    fn record<R>(&self, call: &'static str, f: impl FnOnce(&mut Recorder) -> Result<R>) -> Result<R> {
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

    fn handle(&self, position: usize) -> Handle {
        Handle { instance: self.instance, position: position as u32 }
    }

    fn own(&self, h: Handle) -> Result<usize> {
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

    /// Records a `pre_update` of `keys`.
    pub fn virtual_pre_update(&self, keys: &[RowKey]) -> Result<Handle> {
        index::validate_keys(&self.tables, keys, TableKind::Parameter, "pre_update")?;
        let pos = self.record("virtual_pre_update", |r| Ok(r.acquire(OpKind::PreUpdate, Arc::from(keys))))?;
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

    fn check_param_table(&self, table: TableId) -> Result<()> {
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

    fn param_tables(&self) -> Vec<TableId> {
        (0..self.tables.len() as u32)
            .map(TableId)
            .filter(|t| self.tables[t.0 as usize].kind == TableKind::Parameter)
            .collect()
    }

    /// Ends the virtual iteration: plans placement, builds the indexes, sizes
    /// the buffer pool and starts the background threads. Call it (with no
    /// virtual calls at all, if you do not record) before any real call.
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
    fn start(
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
                tracing::info!(rank = self.rank(), "geeps placement plan:\n{plan}");
                let _ = self.running.set(Running { shared, plan });
                Ok(())
            }
            Err(e) => Err((e, recorder, pull_rx)),
        }
    }

    fn build_shared(&self, ops: Vec<crate::recorder::RecordedOp>) -> Result<(Arc<Shared>, Plan)> {
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
        )?;
        Ok((Arc::new(shared), placement.plan))
    }

    fn spawn(&self, sh: Arc<Shared>, pull_rx: Vec<Receiver<PullMsg>>) -> Result<()> {
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

    // ------------------------------------------------------------------- real

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

    /// Zeroes the counters and restarts the stall-fraction wall clock.
    pub fn reset_stats(&self) {
        if let Some(r) = self.running.get() {
            r.shared.stats.reset();
        }
    }

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
        let raw = self.acquire_by_keys(keys, Fill::Zero, CallKind::PreUpdate)?;
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

    fn send(&self, op: Release) -> Result<()> {
        match self.reclaim_tx.lock().as_ref() {
            Some(lanes) => {
                let tx = if reclaimer::is_local(&op) { &lanes.local } else { &lanes.params };
                tx.send(op).map_err(|_| Error::ShutDown("reclaimer thread has stopped".into()))
            }
            None => Err(Error::ShutDown("instance is shut down".into())),
        }
    }

    /// Restarts the allocator at the application's position with its real state.
    fn resync(&self, sh: &Shared, app: &mut AppState) -> Result<()> {
        self.restart_allocator(sh, app, false)
    }

    /// Discards the allocator's work and restarts it at the application's
    /// position, or parks it (`paused`) while the slow path runs. Buffers
    /// carrying a hand-over's save are saved first: the application has left
    /// the order the hand-over was planned for.
    fn restart_allocator(&self, sh: &Shared, app: &mut AppState, paused: bool) -> Result<()> {
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
    fn save_carried(&self, app: &mut AppState, plan: Arc<AccessPlan>, acquired: Acquired) -> Result<()> {
        app.writes.count(&plan);
        self.send(Release::PostLocal { plan, acquired, save: true })
    }

    /// Saves the carried data of buffers the application holds, and waits
    /// until it is stored, so accesses off the recorded order see it. The
    /// buffers stay held; their posts save again only if asked to.
    fn save_held(&self, sh: &Shared, app: &mut AppState) -> Result<()> {
        let held: Vec<u64> = app.live.iter().filter(|(_, l)| l.acquired.carried).map(|(t, _)| *t).collect();
        for ticket in held {
            let live = app.live.get_mut(&ticket).expect("listed above");
            live.acquired.carried = false;
            let plan = live.plan.clone();
            // A view of the held buffer: no pool buffer goes back with it.
            let view = Acquired {
                buffer: None,
                ptr: live.acquired.ptr,
                floats: live.acquired.floats,
                ages: Vec::new(),
                writes_seen: Vec::new(),
                carried: false,
            };
            app.writes.count(&plan);
            self.send(Release::PostLocal { plan: plan.clone(), acquired: view, save: true })?;
            let policy = WaitPolicy { deadline: Some(Instant::now() + self.config.wait_deadline), log: true };
            let mut applied = sh.writes.lock();
            for &t in &plan.tables {
                access::wait_for_writes(sh, &mut applied, t, app.writes.relevant(t, false), false, policy, &|| {
                    sh.failure()
                })?;
            }
        }
        Ok(())
    }

    fn set_paused(&self, sh: &Shared, app: &mut AppState, paused: bool) -> Result<()> {
        if sh.ops.is_empty() {
            return Ok(());
        }
        self.restart_allocator(sh, app, paused)
    }

    fn register(
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
        app.live.insert(ticket, Live { kind, plan, acquired, release_at, save });
        raw
    }

    fn acquire_by_handle(&self, h: Handle, want: &'static str, call: CallKind) -> Result<RawBuffer> {
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
            let policy = WaitPolicy { deadline: Some(Instant::now() + self.config.wait_deadline), log: true };
            let acquired = access::acquire(
                sh,
                fill,
                &plan,
                &|t| clocks[t],
                &writes,
                policy,
                &|| sh.failure(),
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
    fn take_prefetched(&self, sh: &Shared, pos: usize, clocks: &[u64]) -> Result<Option<(Acquired, bool)>> {
        let mut c = sh.control.lock();
        let policy = WaitPolicy { deadline: Some(Instant::now() + self.config.wait_deadline), log: true };
        let abort = || sh.failure();
        let describe = |_: &crate::engine::Control| self.diagnose(sh, pos, clocks);
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
    fn diagnose(&self, sh: &Shared, pos: usize, clocks: &[u64]) -> String {
        let op = &sh.ops[pos];
        let mut why = Vec::new();
        if let (OpKind::Read { slack }, Some(plan)) = (&op.kind, &sh.plans[pos]) {
            for g in &plan.groups {
                if let crate::index::Target::Param { table, part } = g.target {
                    let Some(required) = slack.required_age(clocks[table]) else { continue };
                    let p = &sh.stores.params[table].as_ref().map(|v| &v[part]);
                    if let Some(st) = p.and_then(|p| p.state.try_lock()) {
                        if st.age < required {
                            why.push(format!(
                                "table `{}` partition {part} is at data age {} and needs {required}: {}",
                                sh.tables[table].name,
                                st.age,
                                access::behind(&st.included, sh.rank)
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
    fn acquire_now(&self, sh: &Shared, fill: Fill, plan: &AccessPlan, clocks: &[u64]) -> Result<Acquired> {
        sh.stats.slow_path.fetch_add(1, Ordering::Relaxed);
        let policy = WaitPolicy { deadline: Some(Instant::now() + self.config.wait_deadline), log: true };
        let abort = || sh.failure();
        // Pausing saves carried hand-overs, which the access must see.
        let writes = {
            let mut app = self.app.lock();
            self.set_paused(sh, &mut app, true)?;
            app.writes.clone()
        };
        let mut staging = Staging::default();
        let result = access::acquire(sh, fill, plan, &|t| clocks[t], &writes, policy, &abort, &mut staging);
        let resumed = self.set_paused(sh, &mut self.app.lock(), false);
        let acquired = result?;
        if let Err(e) = resumed {
            sh.discard(acquired);
            return Err(e);
        }
        Ok(acquired)
    }

    fn acquire_by_keys(&self, keys: &[RowKey], fill: Fill, call: CallKind) -> Result<RawBuffer> {
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
            run.shared.control.lock().shutdown = true;
            run.shared.wake_all();
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

fn live_kind(fill: Fill) -> LiveKind {
    match fill {
        Fill::Read(_) => LiveKind::Read,
        Fill::Zero => LiveKind::Update,
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
    let in_place = acq.buffer.is_none();
    if !access::orders_after_writes(fill, in_place, sh.config.read_my_writes) {
        return true;
    }
    acq.writes_seen.iter().all(|&(t, seen)| seen >= writes.relevant(t, in_place))
}

impl Drop for Geeps {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "geeps shutdown");
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
}

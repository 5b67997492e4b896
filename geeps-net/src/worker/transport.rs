//! The worker side of the network transport: one connection to every keeper
//! shard (its own process's included), over which pushers send update
//! batches and keepers publish rows. Connecting retries until the connect
//! timeout (peers may start later); a keeper that refuses the handshake, goes
//! silent or disconnects fails the worker with an error naming it. The
//! keeper of this same process is still joined over its socket (handshake,
//! heartbeats, failures, leave), but update batches reach it in process and
//! its publications come back in process: those bytes never cross a socket.
//! With the bf16 wire ([`crate::WireEncoding::Bf16`]) batches to the other
//! keepers are encoded here, with error feedback (`bf16_wire`); batches to
//! this process's keeper stay f32 and exact. A keeper on this same host
//! offers a shared-memory segment in its welcome; the worker maps it and
//! the connection's frames then move through it (`shm_stream`), or, when it
//! cannot be opened, stay on TCP.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use geeps_core::transport::{DeltaEncoding, Inbound, Inbox, Landing, Publish, StatsSource, Transport, UpdateBatch};
use geeps_core::{Error, Result, TableSpec};
use parking_lot::Mutex;
use prost::Message;
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::conn::peer_stream::{self, ReadSide, WriteSide};
use crate::conn::writer::{writer, Outgoing, Queue};
use crate::keeper::silence;
use crate::keeper::KeeperService;

use super::publications;
use super::send_window::{self, SendWindow};
use crate::options::{NetOptions, WireEncoding};
use crate::security::tls::Tls;
use crate::shm::segment::{host_identity, Segment};
use crate::wire::bf16::{self as bf16_wire, Residuals};
use crate::wire::bf16_rows::ReceivedRows;
use crate::wire::frame::{read_frame, read_frame_landing, write_frame, FrameError};
use crate::wire::recv_pool::RecvPool;
use crate::wire::{
    table_decls, Body, Encoding, FailureKind, Header, Hello, Leave, ShmAttached, UpdateHeader, WorkerStatus,
    PROTOCOL_VERSION,
};

/// What a batch or leave for one shard travels through.
enum Route {
    /// A connection's writer; `over_tcp` unless it moved onto shared memory.
    Socket { queue: Queue, over_tcp: bool },
    /// The shard kept by this process: an in-order task applies batches
    /// and forwards the leave to the socket after every earlier batch.
    InProcess(mpsc::UnboundedSender<Local>),
}

enum Local {
    Update(UpdateHeader, Option<bytes::Bytes>),
    Forward(Outgoing),
}

impl Route {
    fn send(&self, header: UpdateHeader, deltas: Option<bytes::Bytes>) -> bool {
        match self {
            Route::Socket { queue, .. } => queue.send(Outgoing::new(Body::Update(header), deltas)).is_ok(),
            Route::InProcess(tx) => tx.send(Local::Update(header, deltas)).is_ok(),
        }
    }

    fn forward(&self, o: Outgoing) {
        let _ = match self {
            Route::Socket { queue, .. } => queue.send(o).map_err(drop),
            Route::InProcess(tx) => tx.send(Local::Forward(o)).map_err(drop),
        };
    }
}

/// Applies this process's own batches in push order; the leave (and
/// anything else forwarded) goes to the socket once every earlier batch is in.
async fn apply_local(service: Arc<KeeperService>, rank: usize, mut rx: mpsc::UnboundedReceiver<Local>, socket: Queue) {
    while let Some(m) = rx.recv().await {
        match m {
            Local::Update(header, deltas) => service.apply(rank, header, deltas.unwrap_or_default()),
            Local::Forward(o) => {
                let _ = socket.send(o);
            }
        }
    }
}

pub(crate) struct NetTransport {
    rank: usize,
    addresses: Vec<String>,
    opts: NetOptions,
    /// Set when keeper connections use TLS.
    tls: Option<Arc<Tls>>,
    /// The instance's statistics, reported to keeper 0 (the admin endpoint).
    stats: Arc<Mutex<Option<StatsSource>>>,
    /// What keepers relayed of an operator's requests.
    requests: Arc<OperatorRequests>,
    /// Set once this worker has joined every keeper.
    joined: AtomicBool,
    /// Set when a keeper refused this worker at join.
    refused: AtomicBool,
    runtime: Handle,
    /// This process's keeper (shard `rank`), reached in process.
    local_keeper: Option<Arc<KeeperService>>,
    queues: Mutex<Vec<Option<Route>>>,
    /// What bf16 rounding has not yet sent, per (table, partition) sent over a socket.
    residuals: Residuals,
    /// Buffers of encoded bf16 batches, back once their socket writer is done.
    encoded: RecvPool,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    closing: Arc<AtomicBool>,
    /// Where publications' payloads are read into, once the instance offers it.
    landing: Arc<OnceLock<Landing>>,
    /// The first peer this worker heard lost, if any.
    first_loss: Arc<FirstLoss>,
    /// Keeps update frames over TCP within [`NetOptions::send_window`] stripes (none at 0).
    window: Option<Arc<SendWindow>>,
}

/// The first peer a worker hears lost (rank, keeper address, reason): what
/// the rank reports to its launcher, and why its own failure, if it follows,
/// is no news to the others.
#[derive(Default)]
pub(crate) struct FirstLoss(Mutex<Option<(usize, String, String)>>);

impl FirstLoss {
    fn record(&self, reporter: usize, lost: &Error) {
        let Error::PeerLost { rank, address, reason } = lost else { return };
        let mut first = self.0.lock();
        if first.is_none() {
            *first = Some((*rank, address.clone(), reason.clone()));
            crate::failure_report::write(&crate::failure_report::FailureReport {
                reporter,
                failed: *rank,
                address: address.clone(),
                cause: format!("peer rank {rank} at {address} is lost: {reason}"),
            });
        }
    }

    pub(crate) fn get(&self) -> Option<(usize, String, String)> {
        self.0.lock().clone()
    }
}

fn lost(rank: usize, address: &str, reason: impl Into<String>) -> Error {
    Error::PeerLost { rank, address: address.to_string(), reason: reason.into() }
}

impl NetTransport {
    pub(crate) fn new(
        rank: usize,
        addresses: Vec<String>,
        opts: NetOptions,
        tls: Option<Arc<Tls>>,
        runtime: Handle,
        local_keeper: Option<Arc<KeeperService>>,
    ) -> Self {
        let shards = addresses.len();
        let window = (opts.send_window > 0).then(|| SendWindow::new(opts.send_window));
        NetTransport {
            rank,
            addresses,
            opts,
            tls,
            stats: Arc::new(Mutex::new(None)),
            requests: Arc::new(OperatorRequests::default()),
            joined: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            runtime,
            local_keeper,
            queues: Mutex::new(Vec::new()),
            residuals: Residuals::default(),
            encoded: RecvPool::new(shards),
            tasks: Mutex::new(Vec::new()),
            closing: Arc::new(AtomicBool::new(false)),
            landing: Arc::new(OnceLock::new()),
            first_loss: Arc::new(FirstLoss::default()),
            window,
        }
    }

    /// The first peer this worker heard lost (rank, keeper address, reason).
    pub(crate) fn first_loss(&self) -> Option<(usize, String, String)> {
        self.first_loss.get()
    }

    async fn connect(&self, shard: usize, hello: &Hello) -> Result<(BufReader<ReadSide>, WriteSide)> {
        let address = &self.addresses[shard];
        let start = Instant::now();
        let mut last_log = start;
        loop {
            let stream = match TcpStream::connect(address.as_str()).await {
                Ok(s) => s,
                Err(e) if start.elapsed() < self.opts.connect_timeout => {
                    if last_log.elapsed().as_secs() >= 5 {
                        tracing::warn!(rank = self.rank, shard, %address, error = %e, "still waiting for the keeper to accept");
                        last_log = Instant::now();
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => {
                    return Err(lost(
                        shard,
                        address,
                        format!("could not connect within {} s: {e}", self.opts.connect_timeout.as_secs()),
                    ))
                }
            };
            crate::conn::socket_options::tune(&stream, self.opts.tcp_congestion.as_deref());
            let (rd, mut wr) = match &self.tls {
                None => peer_stream::plain(stream),
                Some(tls) => {
                    match tokio::time::timeout(self.opts.handshake_timeout, tls.connect(stream, address)).await {
                        Ok(Ok(sides)) => sides,
                        // A certificate problem does not go away by retrying.
                        Ok(Err(e)) => {
                            return Err(Error::Mismatch(format!(
                            "TLS handshake of rank {} with keeper {shard} at {address} failed: {e}; give every rank \
                             a certificate signed by the same CA (GEEPS_TLS_CA) that names its host",
                            self.rank
                        )))
                        }
                        Err(_) => return Err(lost(shard, address, "no TLS handshake within the handshake timeout")),
                    }
                }
            };
            let mut rd_buf = BufReader::with_capacity(256 * 1024, rd);
            let sent = write_frame(&mut wr, Header::new(Body::Hello(hello.clone())), None).await;
            let reply = match sent {
                Ok(()) => tokio::time::timeout(self.opts.connect_timeout, read_frame(&mut rd_buf, 1 << 20)).await,
                Err(e) => Ok(Err(e)),
            };
            match reply {
                Ok(Ok((Header { body: Some(Body::Welcome(w)), .. }, _))) if !w.shm_name.is_empty() => {
                    return self.take_offer(shard, &w.shm_name, rd_buf, wr).await
                }
                // Keep the buffered reader: publications may already sit behind the welcome.
                Ok(Ok((Header { body: Some(Body::Welcome(_)), .. }, _))) => return Ok((rd_buf, wr)),
                Ok(Ok((Header { body: Some(Body::Refused(r)), .. }, _))) => {
                    return Err(Error::Mismatch(format!(
                        "keeper {shard} at {address} refused rank {}: {}",
                        self.rank, r.reason
                    )))
                }
                Ok(Ok((h, _))) => return Err(lost(shard, address, format!("unexpected handshake reply {:?}", h.body))),
                // Closed without an answer: the keeper had too many
                // connections waiting for their handshake (strangers, say).
                // Try again until the connect timeout.
                Ok(Err(FrameError::Closed | FrameError::Io(_))) if start.elapsed() < self.opts.connect_timeout => {
                    if last_log.elapsed().as_secs() >= 5 {
                        tracing::warn!(rank = self.rank, shard, %address, "the keeper closed before answering the hello; retrying");
                        last_log = Instant::now();
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Ok(Err(e)) => return Err(lost(shard, address, format!("handshake failed: {e}"))),
                Err(_) => return Err(lost(shard, address, "no handshake reply within the connect timeout")),
            }
        }
    }
}

impl NetTransport {
    /// Answers a keeper's shared-memory offer: maps the segment and echoes
    /// its nonce (the connection then moves onto it), or answers 0 when it
    /// cannot be opened (the connection stays on TCP). A segment that is
    /// there but malformed is an error naming the keeper.
    async fn take_offer(
        &self,
        shard: usize,
        name: &str,
        rd: BufReader<ReadSide>,
        mut wr: WriteSide,
    ) -> Result<(BufReader<ReadSide>, WriteSide)> {
        let address = &self.addresses[shard];
        let opened = Segment::open(&self.opts.shm_dir, name)
            .map_err(|e| lost(shard, address, format!("its shared-memory segment `{name}` is unusable: {e}")))?;
        let nonce = opened.as_ref().map_or(0, |s| s.nonce());
        let answer = Header::new(Body::ShmAttached(ShmAttached { nonce }));
        write_frame(&mut wr, answer, None).await.map_err(|e| lost(shard, address, format!("handshake failed: {e}")))?;
        let Some(seg) = opened else {
            tracing::debug!(rank = self.rank, shard, %address, "the keeper's segment cannot be opened here; staying on TCP");
            return Ok((rd, wr));
        };
        // Both ends have it mapped now: nothing stays behind.
        let _ = std::fs::remove_file(self.opts.shm_dir.join(name));
        // Only the welcome came on the socket; the keeper sends nothing else there but doorbells.
        match peer_stream::onto_shm(rd.into_inner(), wr, Arc::new(seg), false) {
            Ok((rd, wr)) => Ok((BufReader::with_capacity(256 * 1024, rd), wr)),
            Err((rd, wr)) => Ok((BufReader::with_capacity(256 * 1024, rd), wr)),
        }
    }
}

/// Reports this worker's statistics to keeper 0 once a heartbeat interval,
/// until the connection's queue closes.
async fn reporter(queue: Queue, stats: Arc<Mutex<Option<StatsSource>>>, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(source) = stats.lock().clone() else { continue };
        let s = source();
        let status = WorkerStatus {
            wall_seconds: s.wall.as_secs_f64(),
            blocked_seconds: s.blocked.as_secs_f64(),
            stall_fraction: s.stall_fraction,
            bytes_host_to_device: s.bytes_host_to_device,
            bytes_device_to_host: s.bytes_device_to_host,
            slow_path_calls: s.slow_path_calls,
        };
        if queue.send(Outgoing::new(Body::Status(status), None)).is_err() {
            return;
        }
    }
}

/// An operator's requests (geeps-net's admin endpoint), as the keepers
/// relay them to this worker.
#[derive(Default)]
struct OperatorRequests {
    drain: AtomicBool,
    /// The number of the latest checkpoint request heard (0: none).
    checkpoints: AtomicU64,
}

/// What a keeper connection's reader shares with the transport.
struct ReaderEnds {
    /// This worker's rank.
    rank: usize,
    closing: Arc<AtomicBool>,
    requests: Arc<OperatorRequests>,
    landing: Arc<OnceLock<Landing>>,
    first_loss: Arc<FirstLoss>,
}

/// How long a worker holds back a loss it learnt second-hand (a closed
/// connection, or a keeper reporting another rank), so that the failed
/// rank's own account of why, sent by its keeper at the same moment on
/// another stream, is what the program sees.
const SECOND_HAND_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

async fn reader(
    mut rd: BufReader<ReadSide>,
    shard: usize,
    address: String,
    opts: NetOptions,
    inbox: Inbox,
    ends: ReaderEnds,
) {
    let ReaderEnds { rank, closing, requests, landing, first_loss } = ends;
    let mut last_heard = Instant::now();
    // Publications are held until the puller has merged them: two in flight per keeper at most.
    let pool = RecvPool::new(2);
    // f32 rows land where the puller reads them; bf16 changes are added to this keeper's rows first.
    let land = |h: &Header| match &h.body {
        Some(Body::Publish(p)) if p.encoding == u32::from(Encoding::F32) => {
            landing.get()?.slot(p.table, p.partition, p.age, h.payload_len as usize)
        }
        _ => None,
    };
    let mut received = ReceivedRows::default();
    let failure = loop {
        let read = read_frame_landing(&mut rd, opts.max_message_bytes, &pool, &land);
        let frame = match tokio::time::timeout(opts.peer_timeout, read).await {
            Ok(Ok(f)) => f,
            Ok(Err(FrameError::Closed)) => {
                // Second-hand news: the rank's own account may be on its way on another stream.
                tokio::time::sleep(SECOND_HAND_GRACE).await;
                break lost(shard, &address, "keeper closed the connection");
            }
            Ok(Err(e)) => break lost(shard, &address, format!("bad frame from keeper: {e}")),
            Err(_) => break lost(shard, &address, format!("keeper {}", silence(last_heard, &opts))),
        };
        last_heard = Instant::now();
        match frame {
            (Header { body: Some(Body::Publish(p)), .. }, payload) => {
                let rows = match publications::rows_of(&p, payload, &mut received, landing.get()) {
                    Ok(rows) => rows,
                    Err(message) => break lost(shard, &address, format!("bad publication from keeper: {message}")),
                };
                inbox(Inbound::Rows(Publish {
                    table: p.table,
                    partition: p.partition,
                    age: p.age,
                    included: p.included,
                    rows,
                }))
            }
            (Header { body: Some(Body::Failure(f)), .. }, _) if f.kind == u32::from(FailureKind::PeerLost) => {
                if f.rank as usize != shard {
                    // This keeper reports another rank (its connection closed, or it went
                    // silent): that rank's own keeper may be telling why right now.
                    tokio::time::sleep(SECOND_HAND_GRACE).await;
                }
                break Error::PeerLost { rank: f.rank as usize, address: f.address, reason: f.message };
            }
            (Header { body: Some(Body::Failure(f)), .. }, _) if f.kind == u32::from(FailureKind::RefusedAtJoin) => {
                break Error::Mismatch(format!(
                    "rank {} (connecting from {}) was refused at join by keeper {shard}: {}; the cluster cannot run without it",
                    f.rank, f.address, f.message
                ))
            }
            (Header { body: Some(Body::Failure(f)), .. }, _) => {
                break Error::Mismatch(format!("keeper {shard} at {address} rejected an update: {}", f.message))
            }
            (Header { body: Some(Body::Ping(_)), .. }, _) => {}
            (Header { body: Some(Body::Checkpoint(c)), .. }, _) => {
                if requests.checkpoints.fetch_max(c.sequence, Ordering::AcqRel) < c.sequence {
                    tracing::warn!(shard, request = c.sequence, "a checkpoint is asked for");
                }
            }
            (Header { body: Some(Body::Drain(_)), .. }, _) => {
                if !requests.drain.swap(true, Ordering::AcqRel) {
                    tracing::warn!(shard, "the cluster is asked to drain: stopping at the next clock boundary");
                }
            }
            (h, _) => break lost(shard, &address, format!("unexpected frame {:?}", h.body)),
        }
    };
    if !closing.load(Ordering::Acquire) {
        first_loss.record(rank, &failure);
        inbox(Inbound::Failed(failure));
    }
}

impl NetTransport {
    /// Whether this worker joined the cluster (every keeper welcomed it).
    pub(crate) fn has_joined(&self) -> bool {
        self.joined.load(Ordering::Acquire)
    }

    /// Whether a keeper refused this worker at join (and so told the others why).
    pub(crate) fn was_refused(&self) -> bool {
        self.refused.load(Ordering::Acquire)
    }
}

impl NetTransport {
    fn send(&self, shard: usize, header: UpdateHeader, deltas: Option<bytes::Bytes>) -> Result<()> {
        let queues = self.queues.lock();
        let Some(Some(q)) = queues.get(shard) else {
            return Err(Error::InvalidKeys(format!("partition {shard} has no keeper connection")));
        };
        let sent = match (q, &self.window) {
            (Route::Socket { queue, over_tcp: true }, Some(window)) => {
                let world = self.addresses.len() as u64;
                let stripe = u64::from(header.partition) / world;
                let at = send_window::position(header.clock, stripe, self.opts.stripes as u64);
                window.send(at, queue, Outgoing::new(Body::Update(header), deltas))
            }
            _ => q.send(header, deltas),
        };
        if sent {
            Ok(())
        } else {
            Err(lost(shard, &self.addresses[shard], "connection to the keeper is closed"))
        }
    }
}

impl Transport for NetTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn num_workers(&self) -> usize {
        self.addresses.len()
    }

    fn num_shards(&self) -> usize {
        // Partitions, not keepers: keeper k owns k, k + world, ... (`keeper::stripes`).
        self.addresses.len() * self.opts.stripes
    }

    fn join(&self, row_width: usize, tables: &[TableSpec], inbox: Inbox) -> Result<()> {
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            token: self.opts.token.clone(),
            rank: self.rank as u32,
            world: self.addresses.len() as u32,
            row_width: row_width as u32,
            tables: table_decls(tables),
            host: if self.opts.shared_memory && self.tls.is_none() { host_identity() } else { String::new() },
            stripes: self.opts.stripes as u32,
        };
        let size = Header::new(Body::Hello(hello.clone())).encoded_len();
        if size > self.opts.max_handshake_bytes as usize {
            return Err(Error::InvalidConfig {
                field: "max_handshake_bytes",
                reason: format!(
                    "this rank's hello ({} tables) takes {size} bytes, more than the {} keepers accept before the token is checked; raise max_handshake_bytes on every rank",
                    tables.len(),
                    self.opts.max_handshake_bytes
                ),
            });
        }
        if let Some(k) = &self.local_keeper {
            k.attach_local(self.rank, inbox.clone());
        }
        let mut queues = Vec::with_capacity(self.addresses.len());
        let mut tasks = Vec::new();
        for shard in 0..self.addresses.len() {
            let (rd, wr) = self.runtime.block_on(self.connect(shard, &hello)).inspect_err(|e| {
                // A keeper that refuses a rank tells every joined worker why itself.
                if matches!(e, Error::Mismatch(_)) {
                    self.refused.store(true, Ordering::Release);
                }
            })?;
            let over_tcp = !rd.get_ref().is_shm();
            let (tx, rx) = mpsc::unbounded_channel();
            if shard == 0 {
                // Status goes on the socket even to this process's own keeper
                // (control frames do); it ends with the queue at leave.
                self.runtime.spawn(reporter(tx.clone(), self.stats.clone(), self.opts.heartbeat));
            }
            match self.local_keeper.as_ref().filter(|_| shard == self.rank) {
                Some(k) => {
                    let (ltx, lrx) = mpsc::unbounded_channel();
                    tasks.push(self.runtime.spawn(apply_local(k.clone(), self.rank, lrx, tx)));
                    queues.push(Some(Route::InProcess(ltx)));
                }
                None => queues.push(Some(Route::Socket { queue: tx, over_tcp })),
            }
            tasks.push(self.runtime.spawn(writer(wr, rx, self.opts.heartbeat)));
            let ends = ReaderEnds {
                rank: self.rank,
                closing: self.closing.clone(),
                requests: self.requests.clone(),
                landing: self.landing.clone(),
                first_loss: self.first_loss.clone(),
            };
            let (address, opts, inbox) = (self.addresses[shard].clone(), self.opts.clone(), inbox.clone());
            tasks.push(self.runtime.spawn(reader(rd, shard, address, opts, inbox, ends)));
        }
        *self.queues.lock() = queues;
        self.tasks.lock().extend(tasks);
        self.joined.store(true, Ordering::Release);
        Ok(())
    }

    fn push(&self, batch: UpdateBatch) -> Result<()> {
        let shard = batch.partition as usize % self.addresses.len();
        let over_socket = matches!(self.queues.lock().get(shard), Some(Some(Route::Socket { .. })));
        let mut header = UpdateHeader {
            table: batch.table,
            partition: batch.partition,
            worker: batch.worker,
            clock: batch.clock,
            has_deltas: batch.deltas.is_some(),
            encoding: match batch.encoding {
                DeltaEncoding::F32 => Encoding::F32.into(),
                DeltaEncoding::Bf16 => Encoding::Bf16.into(),
                other => return Err(Error::Mismatch(format!("deltas in {other:?}, which this wire cannot carry"))),
            },
        };
        // Deltas already bf16 go as they are; only f32 is encoded.
        if !(over_socket && self.opts.wire == WireEncoding::Bf16 && batch.encoding == DeltaEncoding::F32) {
            return self.send(shard, header, batch.deltas);
        }
        let residual = self.residuals.of(batch.table, batch.partition);
        // Held until the batch is queued, so batches of a partition leave in
        // the order their residuals were updated.
        let mut residual = residual.lock();
        let deltas = bf16_wire::encode(batch.deltas.as_deref(), &mut residual, &self.encoded).map_err(|m| {
            Error::Mismatch(format!("table {} partition {shard} clock {}: {m}", batch.table, batch.clock))
        })?;
        header.has_deltas = deltas.is_some();
        header.encoding = if deltas.is_some() { Encoding::Bf16 } else { Encoding::F32 }.into();
        self.send(shard, header, deltas)
    }

    fn push_only_queues(&self) -> bool {
        true
    }

    fn attach_landing(&self, landing: Landing) {
        // One instance per transport: the first offer stands.
        if self.landing.set(landing.clone()).is_ok() {
            if let Some(keeper) = &self.local_keeper {
                keeper.attach_landing(landing);
            }
        }
    }

    fn attach_stats(&self, stats: StatsSource) {
        *self.stats.lock() = Some(stats);
    }

    fn checkpoint_requests(&self) -> u64 {
        self.requests.checkpoints.load(Ordering::Acquire)
    }

    fn drain_requested(&self) -> bool {
        self.requests.drain.load(Ordering::Acquire)
    }

    fn leave(&self) {
        self.closing.store(true, Ordering::Release);
        // Every held update goes before the leave.
        if let Some(window) = &self.window {
            window.release_all();
        }
        let queues: Vec<_> = self.queues.lock().drain(..).collect();
        for q in queues.iter().flatten() {
            q.forward(Outgoing::new(Body::Leave(Leave { rank: self.rank as u32 }), None));
        }
        drop(queues);
        // Writers flush the leave and close; readers then see the keeper close.
        let tasks: Vec<_> = self.tasks.lock().drain(..).collect();
        let deadline = self.opts.heartbeat * 5 + std::time::Duration::from_secs(5);
        self.runtime.block_on(async {
            for t in tasks {
                let abort = t.abort_handle();
                if tokio::time::timeout(deadline, t).await.is_err() {
                    abort.abort();
                }
            }
        });
    }
}

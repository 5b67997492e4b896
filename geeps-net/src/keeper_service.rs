//! The keeper service of one process: accepts worker connections, checks
//! each worker's handshake (protocol version, token, rank, row width, tables),
//! applies update batches through the core keeper logic and publishes fresh
//! rows to every connected worker when a data age advances. Bad input is
//! rejected with a log line and a `Failure` frame; it never panics and never
//! stops the keeper. A worker that vanishes without leaving is reported to
//! every other worker as lost. Update deltas arrive as f32 or bf16 (the
//! update header says which; the keeper adds bf16 widened, as it comes).
//! The worker of this same process may be attached: its publications then
//! go to its inbox in process, not through its socket (its updates come
//! through `apply`, in order, likewise). A worker on this same host is
//! offered a shared-memory segment in the welcome; once it proves it mapped
//! it, that connection's frames move through the segment (`shm_stream`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use geeps_core::keeper::KeeperShard;
use geeps_core::transport::{DeltaEncoding, Inbound, Inbox, Landing, Publish, UpdateBatch};
use geeps_core::{TableKind, TableSpec};
use parking_lot::Mutex;
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit};

use crate::auth::{token_matches, PendingGate};
use crate::conn::{writer, Outgoing, Queue};
use crate::frame::{read_frame_pooled, read_frame_within, write_frame, FrameError};
use crate::options::NetOptions;
use crate::peer_stream::{self, ReadSide, WriteSide};
use crate::recv_pool::RecvPool;
use crate::shm_segment::{Created, Segment};
use crate::tls::Tls;
use crate::wire::{
    Body, CheckpointRequest, Drain, Failure, Header, Hello, PublishHeader, Refused, TableDecl, Welcome, WorkerStatus,
    ENCODING_BF16, ENCODING_F32, PROTOCOL_VERSION,
};

/// Why a hello was refused.
enum Refusal {
    /// The token is wrong: only the peer is told (a stranger must not be
    /// able to stop the cluster).
    Unauthenticated(String),
    /// An authenticated rank that cannot take part (version, rank, row
    /// width, tables): every joined worker is told.
    Config(String),
}

/// The lost-peer reason for a peer last heard from at `last_heard`.
pub(crate) fn silence(last_heard: Instant, opts: &NetOptions) -> String {
    format!(
        "silent for {:.1} s (no data, no heartbeat; the limit is peer_timeout = {:.1} s, heartbeats every {:.1} s)",
        last_heard.elapsed().as_secs_f64(),
        opts.peer_timeout.as_secs_f64(),
        opts.heartbeat.as_secs_f64()
    )
}

/// One rank as keeper 0 sees it (the admin endpoint's status).
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) struct RankReport {
    pub rank: usize,
    pub address: String,
    pub state: &'static str,
    /// The rank's clock of every parameter table, in [`ClusterReport::tables`] order.
    pub table_clocks: Vec<u64>,
    /// The rank's last report and how long ago it came.
    pub status: Option<(WorkerStatus, Duration)>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// The cluster as keeper 0 sees it.
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) struct ClusterReport {
    /// Parameter tables, in declaration order.
    pub tables: Vec<String>,
    pub ranks: Vec<RankReport>,
    pub draining: bool,
}

#[derive(Default)]
struct Peer {
    queue: Option<Queue>,
    address: String,
    joined: bool,
    left: bool,
    lost: bool,
    /// The rank's last status report, and when it came.
    status: Option<(WorkerStatus, Instant)>,
    /// Payload bytes of the updates this keeper received from the rank.
    bytes_in: u64,
    /// Payload bytes of the publications this keeper queued for the rank.
    bytes_out: AtomicU64,
}

struct State {
    keeper: Option<KeeperShard>,
    declared: Option<(u32, Vec<TableDecl>)>,
    peers: Vec<Peer>,
    /// An operator asked the cluster to drain; told to ranks that join later too.
    draining: bool,
    /// Checkpoints an operator asked for so far; told to ranks that join later too.
    checkpoint_requests: u64,
    /// The rank and inbox of this process's own worker, once attached.
    local: Option<(usize, Inbox)>,
    /// Where this process's own worker lands publications, once it runs:
    /// the keeper writes its rows there (`KeeperShard::publish_into`).
    landing: Option<Landing>,
}

pub(crate) struct KeeperService {
    shard: usize,
    world: usize,
    opts: NetOptions,
    /// Set when connections must be TLS.
    tls: Option<Arc<Tls>>,
    state: Mutex<State>,
    changed: Notify,
    /// Update batches that came over sockets (the attached worker's do not).
    socket_batches: AtomicU64,
    /// Update batches that came through shared memory.
    shm_batches: AtomicU64,
    /// This host's identity, compared with a worker's to offer shared memory.
    host: Arc<String>,
    /// Update frames waiting for the keeper, with the rank whose connection
    /// brought each: whoever holds the keeper next takes them all, so those
    /// that came while it was busy go in together (one pass over the rows).
    /// Locked alone or while holding `state`, never the other way round.
    waiting: Mutex<Vec<(usize, crate::wire::UpdateHeader, Bytes)>>,
}

pub(crate) fn table_decls(tables: &[TableSpec]) -> Vec<TableDecl> {
    tables
        .iter()
        .map(|t| TableDecl {
            name: t.name.clone(),
            kind: match t.kind {
                TableKind::Parameter => 0,
                TableKind::Local => 1,
            },
            rows: t.rows,
        })
        .collect()
}

fn table_specs(decls: &[TableDecl]) -> Result<Vec<TableSpec>, String> {
    decls
        .iter()
        .map(|d| {
            let kind = match d.kind {
                0 => TableKind::Parameter,
                1 => TableKind::Local,
                k => return Err(format!("table `{}` has unknown kind {k}", d.name)),
            };
            Ok(TableSpec { name: d.name.clone(), kind, rows: d.rows })
        })
        .collect()
}

pub(crate) fn publish_frame(p: &Publish) -> Outgoing {
    Outgoing::new(
        Body::Publish(PublishHeader {
            table: p.table,
            partition: p.partition,
            age: p.age,
            included: p.included.clone(),
        }),
        Some(p.rows.clone()),
    )
}

impl KeeperService {
    pub(crate) fn new(shard: usize, world: usize, opts: NetOptions, tls: Option<Arc<Tls>>) -> Arc<Self> {
        Arc::new(KeeperService {
            shard,
            world,
            opts,
            tls,
            state: Mutex::new(State {
                keeper: None,
                declared: None,
                peers: (0..world).map(|_| Peer::default()).collect(),
                draining: false,
                checkpoint_requests: 0,
                local: None,
                landing: None,
            }),
            changed: Notify::new(),
            socket_batches: AtomicU64::new(0),
            shm_batches: AtomicU64::new(0),
            host: Arc::new(crate::shm_segment::host_identity()),
            waiting: Mutex::new(Vec::new()),
        })
    }

    /// Accepts connections until `stop` turns true; at most
    /// `max_pending_connections` of them wait for their handshake at once.
    pub(crate) async fn serve(self: Arc<Self>, listener: TcpListener, mut stop: watch::Receiver<bool>) {
        let mut gate = PendingGate::new(self.opts.max_pending_connections, "keeper");
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, addr)) => {
                        let Some(permit) = gate.admit(addr) else {
                            drop(stream);
                            continue;
                        };
                        let me = self.clone();
                        tokio::spawn(async move { me.handle(stream, addr, permit).await });
                    }
                    Err(e) => tracing::warn!(shard = self.shard, error = %e, "accept failed"),
                },
                _ = stop.changed() => return,
            }
        }
    }

    /// Tells every worker connected to this keeper that this rank is gone
    /// (`PeerLost` naming it, with `reason`): its worker will never clock,
    /// so nobody should wait for it.
    pub(crate) fn abort(&self, address: &str, reason: &str) {
        let st = self.state.lock();
        let failure =
            Failure { kind: 1, rank: self.shard as u32, address: address.to_string(), message: reason.to_string() };
        self.broadcast(&st, || Outgoing::new(Body::Failure(failure.clone()), None), None);
    }

    /// Ranks that joined and have neither left nor been lost, and ranks not yet joined.
    pub(crate) fn pending(&self) -> (Vec<usize>, Vec<usize>) {
        let st = self.state.lock();
        let active =
            st.peers.iter().enumerate().filter(|(_, p)| p.joined && !p.left && !p.lost).map(|(r, _)| r).collect();
        let absent = st.peers.iter().enumerate().filter(|(_, p)| !p.joined).map(|(r, _)| r).collect();
        (active, absent)
    }

    /// Update batches received over sockets so far.
    #[cfg(test)]
    pub(crate) fn socket_batches(&self) -> u64 {
        self.socket_batches.load(Ordering::Relaxed)
    }

    /// Update batches received through shared memory so far.
    #[cfg(test)]
    pub(crate) fn shm_batches(&self) -> u64 {
        self.shm_batches.load(Ordering::Relaxed)
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    /// Checks a hello: the token first (a refusal before it is told to the
    /// peer alone), then everything a rank must agree on (a refusal after it
    /// is told to every worker: the cluster cannot run without that rank).
    fn check_hello(&self, st: &mut State, h: &Hello) -> Result<(), Refusal> {
        if !token_matches(&self.opts.token, &h.token) {
            return Err(Refusal::Unauthenticated(
                "cluster token mismatch; give every rank the same GEEPS_TOKEN".into(),
            ));
        }
        self.check_config(st, h).map_err(Refusal::Config)
    }

    fn check_config(&self, st: &mut State, h: &Hello) -> Result<(), String> {
        if h.protocol != PROTOCOL_VERSION {
            return Err(format!(
                "protocol version {} but this keeper speaks {PROTOCOL_VERSION}; run the same geeps version on every rank",
                h.protocol
            ));
        }
        if h.world as usize != self.world {
            return Err(format!("world size {} but this cluster has {} ranks", h.world, self.world));
        }
        let rank = h.rank as usize;
        if rank >= self.world {
            return Err(format!("rank {rank} is outside 0..{}", self.world));
        }
        if st.peers[rank].joined && !st.peers[rank].left && !st.peers[rank].lost {
            return Err(format!("rank {rank} is already connected (two processes with the same rank?)"));
        }
        table_specs(&h.tables)?;
        // A partition crosses as one frame each way: one over the limit could
        // never be published, and would only take the keeper's memory.
        let limit = self.opts.max_message_bytes;
        for d in h.tables.iter().filter(|d| d.kind == 0) {
            let bytes = u64::from(d.rows).div_ceil(self.world as u64).saturating_mul(u64::from(h.row_width) * 4);
            if bytes > limit {
                return Err(format!(
                    "table `{}`: a partition of up to {bytes} bytes ({} rows of {} floats over {} ranks) is over \
                     max_message_bytes ({limit}); raise it on every rank, or spread the table over more ranks",
                    d.name, d.rows, h.row_width, self.world
                ));
            }
        }
        match &st.declared {
            None => st.declared = Some((h.row_width, h.tables.clone())),
            Some((w, _)) if *w != h.row_width => {
                return Err(format!(
                    "row width {} but the cluster uses {w}; set the same row_width on every rank",
                    h.row_width
                ))
            }
            Some((_, t)) if *t != h.tables => {
                let show =
                    |t: &[TableDecl]| t.iter().map(|d| format!("{}:{}x{}", d.name, d.kind, d.rows)).collect::<Vec<_>>();
                return Err(format!(
                    "tables {:?} differ from the cluster's {:?}; declare the same tables on every rank",
                    show(&h.tables),
                    show(t)
                ));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Publications for `rank` go to `inbox` in process while that rank is
    /// connected (joined over its socket, not left, not lost).
    pub(crate) fn attach_local(&self, rank: usize, inbox: Inbox) {
        self.state.lock().local = Some((rank, inbox));
    }

    /// This process's own worker lands its publications in `landing`: the
    /// keeper writes its rows there, so that worker reads them in place.
    pub(crate) fn attach_landing(&self, landing: Landing) {
        let mut st = self.state.lock();
        if let Some(k) = &mut st.keeper {
            k.publish_into(landing.clone());
        }
        st.landing = Some(landing);
    }

    /// Sends `p` to every connected worker: the attached one in process.
    fn publish(&self, st: &State, p: &Publish) {
        for (r, peer) in st.peers.iter().enumerate() {
            let Some(q) = &peer.queue else { continue };
            match &st.local {
                Some((local, inbox)) if *local == r => inbox(Inbound::Rows(p.clone())),
                _ => {
                    let _ = q.send(publish_frame(p));
                }
            }
        }
    }

    fn broadcast(&self, st: &State, out: impl Fn() -> Outgoing, except: Option<usize>) {
        for (r, p) in st.peers.iter().enumerate() {
            if Some(r) != except {
                if let Some(q) = &p.queue {
                    let o = out();
                    p.bytes_out.fetch_add(o.payload.as_ref().map_or(0, |b| b.len() as u64), Ordering::Relaxed);
                    let _ = q.send(o);
                }
            }
        }
    }

    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    /// What this keeper knows of every rank, for the admin endpoint: state,
    /// last report, bytes, and each rank's clock of every parameter table.
    pub(crate) fn report(&self) -> ClusterReport {
        let st = self.state.lock();
        let tables: Vec<(u32, String)> = st
            .declared
            .as_ref()
            .map(|(_, t)| {
                t.iter().enumerate().filter(|(_, d)| d.kind == 0).map(|(i, d)| (i as u32, d.name.clone())).collect()
            })
            .unwrap_or_default();
        let clocks: Vec<Vec<u64>> = tables
            .iter()
            .map(|(i, _)| st.keeper.as_ref().and_then(|k| k.worker_clocks(*i)).unwrap_or_default())
            .collect();
        let ranks = st
            .peers
            .iter()
            .enumerate()
            .map(|(r, p)| RankReport {
                rank: r,
                address: p.address.clone(),
                state: match (p.joined, p.left, p.lost) {
                    (false, _, _) => "not joined",
                    (true, _, true) => "lost",
                    (true, true, _) => "left",
                    (true, false, false) => "running",
                },
                table_clocks: clocks.iter().map(|c| c.get(r).copied().unwrap_or(0)).collect(),
                status: p.status.as_ref().map(|(s, at)| (s.clone(), at.elapsed())),
                bytes_received: p.bytes_in,
                bytes_sent: p.bytes_out.load(Ordering::Relaxed),
            })
            .collect();
        ClusterReport { tables: tables.into_iter().map(|(_, n)| n).collect(), ranks, draining: st.draining }
    }

    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    /// Tells every rank (and every rank that joins later) to drain; returns
    /// how many were told now.
    pub(crate) fn drain(&self) -> usize {
        let mut st = self.state.lock();
        st.draining = true;
        let told = st.peers.iter().filter(|p| p.queue.is_some()).count();
        self.broadcast(&st, || Outgoing::new(Body::Drain(Drain {}), None), None);
        told
    }

    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    /// Tells every rank (and every rank that joins later) that a checkpoint
    /// was asked for; returns how many were told now and the request's number.
    pub(crate) fn request_checkpoint(&self) -> (usize, u64) {
        let mut st = self.state.lock();
        st.checkpoint_requests += 1;
        let sequence = st.checkpoint_requests;
        let told = st.peers.iter().filter(|p| p.queue.is_some()).count();
        self.broadcast(&st, || Outgoing::new(Body::Checkpoint(CheckpointRequest { sequence }), None), None);
        (told, sequence)
    }

    async fn handle(self: Arc<Self>, stream: TcpStream, addr: SocketAddr, permit: OwnedSemaphorePermit) {
        let _ = stream.set_nodelay(true);
        let (mut rd, mut wr) = match &self.tls {
            None => peer_stream::plain(stream),
            // The TLS handshake counts against the same short deadline as the hello.
            Some(tls) => match tokio::time::timeout(self.opts.handshake_timeout, tls.accept(stream)).await {
                Ok(Ok(sides)) => sides,
                Ok(Err(e)) => {
                    tracing::warn!(shard = self.shard, %addr, error = %e, "TLS handshake refused; closing");
                    return;
                }
                Err(_) => {
                    tracing::warn!(shard = self.shard, %addr, "no TLS handshake within the handshake timeout; closing");
                    return;
                }
            },
        };
        // Until the token is checked: a small frame, no payload, a short
        // deadline, and no buffer of ours (read_exact never reads past the hello).
        let handshake = read_frame_within(&mut rd, self.opts.max_handshake_bytes as usize, 0);
        let hello = match tokio::time::timeout(self.opts.handshake_timeout, handshake).await {
            Ok(Ok((Header { body: Some(Body::Hello(h)), .. }, _))) => h,
            Ok(Ok((h, _))) => {
                tracing::warn!(shard = self.shard, %addr, "first frame is not a hello ({:?}); closing", h.body);
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(shard = self.shard, %addr, error = %e, "bad handshake; closing");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    shard = self.shard,
                    %addr,
                    "no handshake within {:?} (handshake_timeout); closing",
                    self.opts.handshake_timeout
                );
                return;
            }
        };
        let rank = hello.rank as usize;
        let (tx, rx) = mpsc::unbounded_channel();
        // Check and register under one lock: two connections claiming one rank
        // cannot both get in.
        let refused = {
            let mut st = self.state.lock();
            match self.check_hello(&mut st, &hello) {
                Err(reason) => Some(reason),
                Ok(()) => {
                    if st.keeper.is_none() {
                        let specs = table_specs(&hello.tables).unwrap_or_default();
                        let mut keeper =
                            KeeperShard::new(self.shard, self.world, self.world, hello.row_width as usize, &specs);
                        if let Some(landing) = &st.landing {
                            keeper.publish_into(landing.clone());
                        }
                        st.keeper = Some(keeper);
                    }
                    // The welcome goes first, straight on the socket (below);
                    // everything queued now follows it on the connection's transport.
                    if let Some(k) = &st.keeper {
                        for p in k.all_publications() {
                            let _ = tx.send(publish_frame(&p));
                        }
                    }
                    if st.draining {
                        let _ = tx.send(Outgoing::new(Body::Drain(Drain {}), None));
                    }
                    if st.checkpoint_requests > 0 {
                        let sequence = st.checkpoint_requests;
                        let _ = tx.send(Outgoing::new(Body::Checkpoint(CheckpointRequest { sequence }), None));
                    }
                    st.peers[rank] = Peer {
                        queue: Some(tx),
                        address: addr.to_string(),
                        joined: true,
                        left: false,
                        lost: false,
                        ..Peer::default()
                    };
                    None
                }
            }
        };
        drop(permit);
        if let Some(refusal) = refused {
            let reason = match refusal {
                Refusal::Unauthenticated(reason) => {
                    tracing::warn!(shard = self.shard, %addr, claimed_rank = rank, %reason, "join refused");
                    reason
                }
                Refusal::Config(reason) => {
                    // The cluster cannot run without this rank: every worker
                    // that joined hears why at once, instead of waiting.
                    tracing::error!(shard = self.shard, %addr, rank, %reason, "join refused; telling every worker");
                    let failure =
                        Failure { kind: 2, rank: rank as u32, address: addr.to_string(), message: reason.clone() };
                    let st = self.state.lock();
                    self.broadcast(&st, || Outgoing::new(Body::Failure(failure.clone()), None), None);
                    reason
                }
            };
            let _ = write_frame(&mut wr, Header::new(Body::Refused(Refused { reason })), None).await;
            return;
        }
        let reason = match self.settle(&hello, rd, wr).await {
            Err(reason) => reason,
            Ok((rd, wr)) => {
                tracing::debug!(shard = self.shard, rank, %addr, shm = rd.is_shm(), "worker joined");
                self.changed.notify_waiters();
                tokio::spawn(writer(wr, rx, self.opts.heartbeat));
                match self.serve_worker(rank, rd).await {
                    Some(reason) => reason,
                    None => return,
                }
            }
        };
        // The worker is gone without leaving: everyone blocked on it must fail.
        let mut st = self.state.lock();
        st.peers[rank].lost = true;
        st.peers[rank].queue = None;
        let address = st.peers[rank].address.clone();
        tracing::error!(shard = self.shard, rank, %address, %reason, "worker lost");
        let failure = Failure { kind: 1, rank: rank as u32, address, message: reason };
        self.broadcast(&st, || Outgoing::new(Body::Failure(failure.clone()), None), None);
        drop(st);
        self.changed.notify_waiters();
    }

    /// A segment for a worker on this host that asked for one (shared
    /// memory on here too, no TLS); `None` when there is none to offer.
    fn offer(&self, hello: &Hello) -> Option<(Arc<Segment>, Created)> {
        // This process's own worker sends its data in process: its
        // connection carries control frames only and needs no segment.
        let own = hello.rank as usize == self.shard;
        if own || !self.opts.shared_memory || self.tls.is_some() || hello.host.is_empty() || hello.host != *self.host {
            return None;
        }
        match Segment::create(&self.opts.shm_dir, self.opts.shm_ring_bytes) {
            Ok((seg, created)) => Some((Arc::new(seg), created)),
            Err(e) => {
                tracing::debug!(shard = self.shard, rank = hello.rank, dir = %self.opts.shm_dir.display(), error = %e,
                    "cannot create a shared-memory segment; this connection stays on TCP");
                None
            }
        }
    }

    /// Sends the welcome (offering a segment when the worker is on this
    /// host) and settles the connection's transport: shared memory when the
    /// worker proves it mapped the segment, TCP otherwise. `Err`: the
    /// worker is gone (the reason).
    async fn settle(
        &self,
        hello: &Hello,
        mut rd: ReadSide,
        mut wr: WriteSide,
    ) -> Result<(ReadSide, WriteSide), String> {
        let offer = self.offer(hello);
        let shm_name = offer.as_ref().map(|(_, c)| c.name.clone()).unwrap_or_default();
        let welcome = Welcome { shard: self.shard as u32, shm_name };
        write_frame(&mut wr, Header::new(Body::Welcome(welcome)), None)
            .await
            .map_err(|e| format!("could not send the welcome: {e}"))?;
        let Some((seg, created)) = offer else { return Ok((rd, wr)) };
        let answer = read_frame_within(&mut rd, 1024, 0);
        let nonce = match tokio::time::timeout(self.opts.handshake_timeout, answer).await {
            Ok(Ok((Header { body: Some(Body::ShmAttached(a)), .. }, _))) => a.nonce,
            Ok(Ok((h, _))) => return Err(format!("expected the answer to the shared-memory offer, got {:?}", h.body)),
            Ok(Err(e)) => return Err(format!("no answer to the shared-memory offer: {e}")),
            Err(_) => return Err("no answer to the shared-memory offer within the handshake timeout".into()),
        };
        created.unlink();
        if nonce != seg.nonce() {
            tracing::debug!(
                shard = self.shard,
                rank = hello.rank,
                "the worker could not map the segment; staying on TCP"
            );
            return Ok((rd, wr));
        }
        Ok(peer_stream::onto_shm(rd, wr, seg, true).unwrap_or_else(|sides| sides))
    }

    /// Reads a joined worker's frames until it leaves (`None`) or is lost (the reason).
    async fn serve_worker(&self, rank: usize, rd: ReadSide) -> Option<String> {
        let max = self.opts.max_message_bytes;
        let over_shm = rd.is_shm();
        let mut rd = BufReader::with_capacity(256 * 1024, rd);
        let mut last_heard = Instant::now();
        // Update batches return once applied (or once a held batch is).
        let pool = RecvPool::new(2);
        let reason = loop {
            let frame = match tokio::time::timeout(self.opts.peer_timeout, read_frame_pooled(&mut rd, max, &pool)).await
            {
                Ok(Ok(f)) => f,
                Ok(Err(FrameError::Closed)) => break "connection closed without leaving".to_string(),
                Ok(Err(e)) => break format!("bad frame: {e}"),
                Err(_) => break silence(last_heard, &self.opts),
            };
            last_heard = Instant::now();
            match frame {
                (Header { body: Some(Body::Update(u)), .. }, payload) => {
                    let counter = if over_shm { &self.shm_batches } else { &self.socket_batches };
                    counter.fetch_add(1, Ordering::Relaxed);
                    self.apply(rank, u, payload)
                }
                (Header { body: Some(Body::Leave(_)), .. }, _) => {
                    let mut st = self.state.lock();
                    st.peers[rank].left = true;
                    st.peers[rank].queue = None;
                    let pubs = st.keeper.as_mut().map(|k| k.depart(rank)).unwrap_or_default();
                    for p in &pubs {
                        self.publish(&st, p);
                    }
                    drop(st);
                    tracing::debug!(shard = self.shard, rank, "worker left");
                    self.changed.notify_waiters();
                    return None;
                }
                (Header { body: Some(Body::Ping(_)), .. }, _) => {}
                (Header { body: Some(Body::Status(s)), .. }, _) => {
                    self.state.lock().peers[rank].status = Some((s, Instant::now()));
                }
                (h, _) => break format!("unexpected frame {:?}", h.body),
            }
        };
        Some(reason)
    }

    /// Applies a batch that came from `rank`'s connection (or, in process,
    /// from the attached worker, in push order). bf16 deltas go to the keeper
    /// as they are (it adds them widened, checking their length first).
    /// Returns once the batch went in (by this caller or by another that took
    /// it with its own), so a connection's frames still go in in order.
    pub(crate) fn apply(&self, rank: usize, u: crate::wire::UpdateHeader, payload: Bytes) {
        self.waiting.lock().push((rank, u, payload));
        loop {
            // Holding the keeper means whoever took this batch before has applied it.
            let mut st = self.state.lock();
            let waiting = std::mem::take(&mut *self.waiting.lock());
            if waiting.is_empty() {
                return;
            }
            self.apply_waiting(&mut st, waiting);
        }
    }

    fn apply_waiting(&self, st: &mut State, waiting: Vec<(usize, crate::wire::UpdateHeader, Bytes)>) {
        let mut batches = Vec::with_capacity(waiting.len());
        let mut senders = Vec::with_capacity(waiting.len());
        for (rank, u, payload) in waiting {
            st.peers[rank].bytes_in += payload.len() as u64;
            let batch = if u.worker as usize != rank {
                Err(format!("connection of rank {rank} sent a batch of worker {}", u.worker))
            } else if st.keeper.is_none() {
                Err("no tables declared".into())
            } else {
                batch_of(&u, payload)
            };
            match batch {
                Ok(b) => {
                    batches.push(b);
                    senders.push((rank, u));
                }
                Err(message) => self.refuse(st, rank, &u, message),
            }
        }
        let Some(k) = st.keeper.as_mut() else { return };
        let results = k.apply_many(&batches);
        for ((rank, u), result) in senders.iter().zip(results) {
            match result {
                Ok(Some(p)) => self.publish(st, &p),
                Ok(None) => {}
                Err(e) => self.refuse(st, *rank, u, e.to_string()),
            }
        }
    }

    /// Tells `rank` its batch was refused (and logs why).
    fn refuse(&self, st: &State, rank: usize, u: &crate::wire::UpdateHeader, message: String) {
        tracing::warn!(shard = self.shard, rank, table = u.table, clock = u.clock, %message, "update batch rejected");
        if let Some(q) = &st.peers[rank].queue {
            let f = Failure { kind: 0, rank: self.shard as u32, address: String::new(), message };
            let _ = q.send(Outgoing::new(Body::Failure(f), None));
        }
    }
}

/// The batch an update frame carries: its deltas present only when the
/// header says so, in the encoding it names. A payload on a batch without
/// deltas, bf16 without deltas, or an unknown encoding is refused (the
/// keeper then checks the length against the partition).
pub(crate) fn batch_of(u: &crate::wire::UpdateHeader, payload: Bytes) -> Result<UpdateBatch, String> {
    let encoding = match u.encoding {
        ENCODING_F32 => DeltaEncoding::F32,
        ENCODING_BF16 if u.has_deltas => DeltaEncoding::Bf16,
        ENCODING_BF16 => return Err("batch without deltas says its deltas are bf16".to_string()),
        other => {
            return Err(format!(
                "deltas in unknown encoding {other} (this keeper reads {ENCODING_F32} = f32, {ENCODING_BF16} = bf16); run the same geeps version on every rank"
            ))
        }
    };
    if !u.has_deltas && !payload.is_empty() {
        return Err("batch without deltas carries a payload".into());
    }
    Ok(UpdateBatch {
        table: u.table,
        partition: u.partition,
        worker: u.worker,
        clock: u.clock,
        deltas: u.has_deltas.then_some(payload),
        encoding,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{UpdateHeader, ENCODING_F32};
    use geeps_core::{TableKind, TableSpec};

    fn floats(bytes: &Bytes) -> Vec<f32> {
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn a_partition_over_the_message_limit_is_refused_at_hello_and_allocates_nothing() {
        let service = KeeperService::new(0, 2, NetOptions::default().with_max_message_bytes(1 << 20), None);
        let hello = |rows: u32, row_width: u32, kind: u32| Hello {
            protocol: PROTOCOL_VERSION,
            rank: 0,
            world: 2,
            row_width,
            tables: vec![TableDecl { name: "w".into(), kind, rows }],
            ..Default::default()
        };
        let mut st = service.state.lock();
        // 2^20 bytes per partition at most: 2048 rows of 128 floats each is exactly that.
        let e = service.check_config(&mut st, &hello(4097, 128, 0)).unwrap_err();
        assert!(e.contains("table `w`: a partition of up to 1049088 bytes"), "{e}");
        assert!(e.contains("max_message_bytes (1048576)"), "{e}");
        let e = service.check_config(&mut st, &hello(u32::MAX, u32::MAX, 0)).unwrap_err();
        assert!(e.contains("raise it on every rank"), "{e}");
        assert!(st.declared.is_none() && st.keeper.is_none());
        // Local tables stay on their worker: no limit here.
        service.check_config(&mut st, &hello(u32::MAX, 128, 1)).unwrap();
        drop(st);
        let service = KeeperService::new(0, 2, NetOptions::default().with_max_message_bytes(1 << 20), None);
        service.check_config(&mut service.state.lock(), &hello(4096, 128, 0)).unwrap();
    }

    #[test]
    fn batches_from_many_connections_at_once_all_go_in_before_apply_returns() {
        const WORKERS: usize = 4;
        const CLOCKS: u64 = 40;
        let rows = 8192usize;
        let service = KeeperService::new(0, WORKERS, NetOptions::default(), None);
        let spec = TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: rows as u32 };
        service.state.lock().keeper = Some(KeeperShard::new(0, 1, WORKERS, 1, &[spec]));
        std::thread::scope(|s| {
            for w in 0..WORKERS {
                let service = &service;
                s.spawn(move || {
                    for clock in 0..CLOCKS {
                        let u = UpdateHeader {
                            table: 0,
                            partition: 0,
                            worker: w as u32,
                            clock,
                            has_deltas: true,
                            encoding: ENCODING_F32,
                        };
                        let deltas: Vec<u8> = (0..rows).flat_map(|_| (w as f32 + 1.0).to_le_bytes()).collect();
                        service.apply(w, u, Bytes::from(deltas));
                        // Applied (or waiting in turn) by the time apply returns.
                        let arrived = service.state.lock().keeper.as_ref().unwrap().worker_clocks(0).unwrap();
                        assert!(arrived[w] > clock, "worker {w} clock {clock} not taken: {arrived:?}");
                    }
                });
            }
        });
        let st = service.state.lock();
        let k = st.keeper.as_ref().unwrap();
        // 1 + 2 + 3 + 4 per clock: exact in f32 whatever the order.
        let want = (WORKERS * (WORKERS + 1) / 2) as f32 * CLOCKS as f32;
        assert!(floats(&k.rows(0).unwrap()).iter().all(|&v| v == want));
        assert_eq!(k.publication(0).age, CLOCKS);
        assert!(service.waiting.lock().is_empty());
    }
}

//! The keeper service's state: every rank's connection as this keeper sees
//! it, the core keeper shard once tables are declared, and what this
//! process's own worker attached. The jobs that use it (admission, offers,
//! sessions, apply and publish, liveness, operator requests) live in their
//! own files; this one never reads a socket.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use geeps_core::transport::{Inbox, Landing};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::conn::writer::Queue;
use crate::options::NetOptions;
use crate::security::tls::Tls;
use crate::wire::bf16_rows::SentRows;

use super::stripes::Stripes;
use crate::wire::{TableDecl, UpdateHeader, WorkerStatus};

#[derive(Default)]
pub(super) struct Peer {
    pub(super) queue: Option<Queue>,
    pub(super) address: String,
    pub(super) joined: bool,
    pub(super) left: bool,
    pub(super) lost: bool,
    /// The rank's last status report, and when it came.
    pub(super) status: Option<(WorkerStatus, Instant)>,
    /// Payload bytes of the updates this keeper received from the rank.
    pub(super) bytes_in: u64,
    /// Payload bytes of the publications this keeper queued for the rank.
    pub(super) bytes_out: AtomicU64,
}

pub(super) struct State {
    /// This keeper's partitions of every table, once tables are declared.
    pub(super) keeper: Option<Stripes>,
    pub(super) declared: Option<(u32, Vec<TableDecl>)>,
    pub(super) peers: Vec<Peer>,
    /// An operator asked the cluster to drain; told to ranks that join later too.
    pub(super) draining: bool,
    /// Checkpoints an operator asked for so far; told to ranks that join later too.
    pub(super) checkpoint_requests: u64,
    /// The rank and inbox of this process's own worker, once attached.
    pub(super) local: Option<(usize, Inbox)>,
    /// Where this process's own worker lands publications, once it runs:
    /// the keeper writes its rows there (`KeeperShard::publish_into`).
    pub(super) landing: Option<Landing>,
    /// What the other workers hold of each table, where publications go
    /// as bf16 changes (`NetOptions::publish_wire`).
    pub(super) sent: SentRows,
}

pub(crate) struct KeeperService {
    pub(super) shard: usize,
    pub(super) world: usize,
    pub(super) opts: NetOptions,
    /// Set when connections must be TLS.
    pub(super) tls: Option<Arc<Tls>>,
    pub(super) state: Mutex<State>,
    pub(super) changed: Notify,
    /// Update batches that came over sockets (the attached worker's do not).
    pub(super) socket_batches: AtomicU64,
    /// Update batches that came through shared memory.
    pub(super) shm_batches: AtomicU64,
    /// This host's identity, compared with a worker's to offer shared memory.
    pub(super) host: Arc<String>,
    /// Update frames waiting for the keeper, with the rank whose connection
    /// brought each: whoever holds the keeper next takes them all, so those
    /// that came while it was busy go in together (one pass over the rows).
    /// Locked alone or while holding `state`, never the other way round.
    pub(super) waiting: Mutex<Vec<(usize, UpdateHeader, Bytes)>>,
    /// Every rank's keeper address, once the cluster knows them: how a lost
    /// rank is named (its workers connect from ports of no meaning).
    pub(super) keeper_addresses: std::sync::OnceLock<Vec<String>>,
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
                sent: SentRows::default(),
            }),
            changed: Notify::new(),
            socket_batches: AtomicU64::new(0),
            shm_batches: AtomicU64::new(0),
            host: Arc::new(crate::shm::segment::host_identity()),
            waiting: Mutex::new(Vec::new()),
            keeper_addresses: std::sync::OnceLock::new(),
        })
    }

    /// Tells the service where every rank's keeper listens.
    pub(crate) fn set_keeper_addresses(&self, addresses: Vec<String>) {
        let _ = self.keeper_addresses.set(addresses);
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
        self.socket_batches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Update batches received through shared memory so far.
    #[cfg(test)]
    pub(crate) fn shm_batches(&self) -> u64 {
        self.shm_batches.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) async fn changed(&self) {
        self.changed.notified().await
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
}

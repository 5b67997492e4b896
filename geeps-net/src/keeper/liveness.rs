//! Peers that are gone: the reason given for a silent peer, a worker lost
//! without leaving, and this rank stopping before its worker joined. Each
//! is told to every connected worker at once so nobody waits for a clock
//! that will never come. It never closes a connection itself.

use std::time::Instant;

use tokio::sync::oneshot;

use super::service::KeeperService;
use crate::conn::writer::Outgoing;
use crate::options::NetOptions;
use crate::wire::{Body, Failure, FailureKind};

/// The lost-peer reason for a peer last heard from at `last_heard`.
pub(crate) fn silence(last_heard: Instant, opts: &NetOptions) -> String {
    format!(
        "silent for {:.1} s (no data, no heartbeat; the limit is peer_timeout = {:.1} s, heartbeats every {:.1} s)",
        last_heard.elapsed().as_secs_f64(),
        opts.peer_timeout.as_secs_f64(),
        opts.heartbeat.as_secs_f64()
    )
}

impl KeeperService {
    /// Tells every worker connected to this keeper that this rank is gone
    /// (`PeerLost` naming it, with `reason`): its worker will never clock,
    /// so nobody should wait for it.
    /// Returns, per connected worker, a receiver told once the news is
    /// flushed to its socket.
    pub(crate) fn abort(&self, address: &str, reason: &str) -> Vec<oneshot::Receiver<()>> {
        let st = self.state.lock();
        let failure = Failure {
            kind: FailureKind::PeerLost.into(),
            rank: self.shard as u32,
            address: address.to_string(),
            message: reason.to_string(),
        };
        let flushed = parking_lot::Mutex::new(Vec::new());
        self.broadcast(
            &st,
            || {
                let (o, rx) = Outgoing::new(Body::Failure(failure.clone()), None).tracked();
                flushed.lock().push(rx);
                o
            },
            None,
        );
        flushed.into_inner()
    }

    /// The worker of `rank` is gone without leaving (`reason`): everyone
    /// blocked on it must fail, so every other worker hears it lost.
    pub(super) fn lose(&self, rank: usize, reason: String) {
        let mut st = self.state.lock();
        st.peers[rank].lost = true;
        st.peers[rank].queue = None;
        let connected_from = st.peers[rank].address.clone();
        let address =
            self.keeper_addresses.get().and_then(|a| a.get(rank)).cloned().unwrap_or_else(|| connected_from.clone());
        tracing::error!(shard = self.shard, rank, %address, %connected_from, %reason, "worker lost");
        let failure = Failure { kind: FailureKind::PeerLost.into(), rank: rank as u32, address, message: reason };
        self.broadcast(&st, || Outgoing::new(Body::Failure(failure.clone()), None), None);
        drop(st);
        self.changed.notify_waiters();
    }
}

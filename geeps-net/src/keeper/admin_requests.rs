//! What an operator asks of keeper 0 through the admin endpoint: the
//! cluster's report (every rank's state, clocks, last status and bytes),
//! a drain, a checkpoint. It only reads the keeper's state and queues
//! frames; it never blocks the keeper.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::service::KeeperService;
use crate::conn::writer::Outgoing;
use crate::wire::{Body, CheckpointRequest, Drain, WorkerStatus};

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

impl KeeperService {
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    /// What this keeper knows of every rank, for the admin endpoint: state,
    /// last report, bytes, and each rank's clock of every parameter table.
    pub(crate) fn report(&self) -> ClusterReport {
        let st = self.state.lock();
        let tables: Vec<(u32, String)> = st
            .declared
            .as_ref()
            .map(|(_, t)| {
                t.iter()
                    .enumerate()
                    .filter(|(_, d)| d.is_parameter())
                    .map(|(i, d)| (i as u32, d.name.clone()))
                    .collect()
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
}

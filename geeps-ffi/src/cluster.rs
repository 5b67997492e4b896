//! `geeps_cluster`: the cluster a worker joins, as C holds it. Either an
//! in-process cluster (N workers in this process, one rank each) or this
//! process's membership in a network cluster (geeps-net: one rank, its
//! keeper shard, the transport to every keeper). It owns the claim on each
//! rank, so that two instances never join as the same worker, and the order
//! of shutdown: a network cluster stops only after every instance of this
//! process that joined it has stopped. Keeper logic is the engine's and
//! geeps-net's, never this file's.

use std::sync::Arc;

use geeps_core::{InProcessCluster, Transport};
use geeps_net::NetCluster;
use parking_lot::Mutex;

use crate::registry::Registry;
use crate::status::{Failure, FfiResult, GeepsStatus};

/// A cluster of workers: in-process (`geeps_cluster_new`) or this process's
/// rank of a network cluster (`geeps_cluster_from_env`,
/// `geeps_cluster_connect`). Opaque; free with `geeps_cluster_free`.
pub struct GeepsCluster {
    backend: Backend,
    ranks: Mutex<Ranks>,
}

enum Backend {
    InProcess(InProcessCluster),
    /// Locked (briefly) to hand out the transport, and for
    /// `NetCluster::shutdown`, which takes `&mut`.
    Net {
        cluster: Box<Mutex<NetCluster>>,
        rank: usize,
        world: usize,
    },
}

/// What became of one rank: joined once, by one instance, then left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RankState {
    Free,
    Joined,
    Left,
}

struct Ranks {
    states: Vec<RankState>,
    /// `geeps_cluster_shutdown` was called: no instance may join any more.
    closed: bool,
}

pub(crate) static CLUSTERS: Registry<GeepsCluster> = Registry::new("geeps_cluster");

/// A rank of a cluster, held by the instance that joined as it. Dropping it
/// marks the rank as left; the instance drops it after its engine stopped,
/// so a network cluster released by this drop outlives the engine.
pub(crate) struct RankClaim {
    cluster: Arc<GeepsCluster>,
    rank: usize,
}

impl GeepsCluster {
    pub(crate) fn in_process(cluster: InProcessCluster) -> Self {
        let workers = cluster.num_workers();
        GeepsCluster { backend: Backend::InProcess(cluster), ranks: Ranks::new(workers) }
    }

    pub(crate) fn net(cluster: NetCluster) -> Self {
        let (rank, world) = (cluster.rank(), cluster.world());
        GeepsCluster {
            backend: Backend::Net { cluster: Box::new(Mutex::new(cluster)), rank, world },
            ranks: Ranks::new(world),
        }
    }

    /// The number of workers (in-process) or ranks (network).
    pub(crate) fn workers(&self) -> usize {
        match &self.backend {
            Backend::InProcess(c) => c.num_workers(),
            Backend::Net { world, .. } => *world,
        }
    }

    /// This process's rank of a network cluster; an in-process cluster has
    /// one rank per worker, so it has none of its own.
    pub(crate) fn own_rank(&self) -> FfiResult<usize> {
        match &self.backend {
            Backend::Net { rank, .. } => Ok(*rank),
            Backend::InProcess(c) => Err(Failure::invalid(format!(
                "this in-process cluster of {} has one rank per worker ({}), chosen with \
                 geeps_config_set_cluster; only a network cluster has a rank of its own",
                workers(c.num_workers()),
                ranks(c.num_workers())
            ))),
        }
    }

    /// Checks that an instance of this process may join as `rank`.
    pub(crate) fn check_rank(&self, rank: usize) -> FfiResult {
        if self.ranks.lock().closed {
            return Err(Failure::new(GeepsStatus::ShutDown, "the cluster is shut down (geeps_cluster_shutdown)"));
        }
        match &self.backend {
            Backend::InProcess(c) if rank >= c.num_workers() => {
                return Err(Failure::new(
                    GeepsStatus::InvalidConfig,
                    format!(
                        "rank {rank} requested, but this in-process cluster has {}: ranks {}",
                        workers(c.num_workers()),
                        ranks(c.num_workers())
                    ),
                ));
            }
            Backend::InProcess(c) => {
                c.transport(rank)?;
            }
            Backend::Net { rank: own, world, .. } if rank != *own => {
                return Err(Failure::new(
                    GeepsStatus::InvalidConfig,
                    format!(
                        "rank {rank} requested, but this process is rank {own} of its network cluster of {world}; \
                         pass the value of geeps_cluster_rank"
                    ),
                ));
            }
            Backend::Net { .. } => {}
        }
        Ok(())
    }

    /// Claims `rank` for one instance and returns its transport.
    pub(crate) fn claim(self: &Arc<Self>, rank: usize) -> FfiResult<(RankClaim, Arc<dyn Transport>)> {
        self.check_rank(rank)?;
        let transport = match &self.backend {
            Backend::InProcess(c) => c.transport(rank)?,
            Backend::Net { cluster, .. } => cluster.lock().transport(),
        };
        let mut ranks = self.ranks.lock();
        if ranks.closed {
            return Err(Failure::new(GeepsStatus::ShutDown, "the cluster is shut down (geeps_cluster_shutdown)"));
        }
        if ranks.states[rank] != RankState::Free {
            return Err(Failure::new(
                GeepsStatus::InvalidConfig,
                format!("rank {rank} of this cluster already has an instance; give each worker its own rank"),
            ));
        }
        ranks.states[rank] = RankState::Joined;
        Ok((RankClaim { cluster: self.clone(), rank }, transport))
    }

    /// Stops the cluster once no instance of this process is running in it:
    /// a network cluster waits (up to its shutdown timeout) until every
    /// worker has left this rank's keeper, then stops the keeper. Idempotent.
    pub(crate) fn shutdown(&self) -> FfiResult {
        {
            let mut ranks = self.ranks.lock();
            if let Some(rank) = ranks.states.iter().position(|s| *s == RankState::Joined) {
                return Err(Failure::new(
                    GeepsStatus::InvalidState,
                    format!(
                        "the instance of rank {rank} is still running; shut it down (geeps_shutdown) or free it \
                         before the cluster"
                    ),
                ));
            }
            ranks.closed = true;
        }
        match &self.backend {
            Backend::InProcess(_) => Ok(()),
            Backend::Net { cluster, .. } => Ok(cluster.lock().shutdown()?),
        }
    }
}

/// "1 worker", "2 workers".
fn workers(n: usize) -> String {
    if n == 1 {
        "1 worker".into()
    } else {
        format!("{n} workers")
    }
}

/// The ranks of `n` workers as a C programmer reads them: "0", "0 and 1",
/// "0 to 3".
fn ranks(n: usize) -> String {
    match n {
        0 => "none".into(),
        1 => "0 only".into(),
        2 => "0 and 1".into(),
        _ => format!("0 to {}", n - 1),
    }
}

impl Ranks {
    fn new(n: usize) -> Mutex<Self> {
        Mutex::new(Ranks { states: vec![RankState::Free; n], closed: false })
    }
}

impl RankClaim {
    /// Gives the rank back, for an instance that failed to join.
    pub(crate) fn release(self) {
        self.cluster.ranks.lock().states[self.rank] = RankState::Free;
    }
}

impl Drop for RankClaim {
    fn drop(&mut self) {
        let mut ranks = self.cluster.ranks.lock();
        if ranks.states[self.rank] == RankState::Joined {
            ranks.states[self.rank] = RankState::Left;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status<T>(r: FfiResult<T>) -> GeepsStatus {
        r.err().map_or(GeepsStatus::Ok, |f| f.status)
    }

    #[test]
    fn a_rank_is_joined_once_and_shutdown_waits_for_its_instance() {
        let cluster = Arc::new(GeepsCluster::in_process(InProcessCluster::new(2).unwrap()));
        assert_eq!(cluster.workers(), 2);
        assert_eq!(status(cluster.own_rank()), GeepsStatus::InvalidArgument);
        assert_eq!(status(cluster.check_rank(2)), GeepsStatus::InvalidConfig);
        let beyond = cluster.check_rank(2).unwrap_err().message;
        assert_eq!(beyond, "rank 2 requested, but this in-process cluster has 2 workers: ranks 0 and 1");
        let own = cluster.own_rank().unwrap_err().message;
        assert!(own.contains("cluster of 2 workers has one rank per worker (0 and 1)"), "{own}");

        let (failed, _) = cluster.claim(0).unwrap();
        failed.release();
        let (claim, _) = cluster.claim(0).unwrap();
        assert_eq!(status(cluster.claim(0)), GeepsStatus::InvalidConfig);
        assert_eq!(status(cluster.shutdown()), GeepsStatus::InvalidState, "rank 0 still runs");
        drop(claim);
        assert_eq!(status(cluster.claim(0)), GeepsStatus::InvalidConfig, "a rank that left is not reused");

        cluster.shutdown().unwrap();
        cluster.shutdown().unwrap();
        assert_eq!(status(cluster.claim(1)), GeepsStatus::ShutDown);
        assert_eq!(status(cluster.check_rank(1)), GeepsStatus::ShutDown);
    }
}

//! `geeps_cluster`: an in-process cluster of N workers (one instance per
//! worker, usually one thread each) and the claim on each of its ranks, so
//! that two instances never join as the same worker. It owns no keeper
//! logic; that is the engine's `InProcessCluster`.

use std::sync::Arc;

use geeps_core::{InProcessCluster, Transport};
use parking_lot::Mutex;

use crate::guard::guard;
use crate::marshal::write_out;
use crate::registry::Registry;
use crate::status::{Failure, FfiResult, GeepsStatus};

/// An in-process cluster: N workers in one process sharing keeper shards.
/// Opaque; create with `geeps_cluster_new`, free with `geeps_cluster_free`.
pub struct GeepsCluster {
    cluster: InProcessCluster,
    /// Per rank: whether an instance has joined as that worker.
    taken: Mutex<Vec<bool>>,
}

pub(crate) static CLUSTERS: Registry<GeepsCluster> = Registry::new("geeps_cluster");

/// A rank of a cluster, held by the instance that joined as it.
pub(crate) struct RankClaim {
    cluster: Arc<GeepsCluster>,
    rank: usize,
}

impl GeepsCluster {
    pub(crate) fn workers(&self) -> usize {
        self.cluster.num_workers()
    }

    /// Checks that `rank` is a rank of this cluster.
    pub(crate) fn check_rank(&self, rank: usize) -> FfiResult {
        self.cluster.transport(rank)?;
        Ok(())
    }

    /// Claims `rank` for one instance and returns its transport.
    pub(crate) fn claim(self: &Arc<Self>, rank: usize) -> FfiResult<(RankClaim, Arc<dyn Transport>)> {
        let transport = self.cluster.transport(rank)?;
        let mut taken = self.taken.lock();
        if taken[rank] {
            return Err(Failure::new(
                GeepsStatus::InvalidConfig,
                format!("rank {rank} of this cluster already has an instance; give each worker its own rank"),
            ));
        }
        taken[rank] = true;
        Ok((RankClaim { cluster: self.clone(), rank }, transport))
    }
}

impl RankClaim {
    /// Gives the rank back, for an instance that failed to join.
    pub(crate) fn release(self) {
        self.cluster.taken.lock()[self.rank] = false;
    }
}

/// Creates an in-process cluster of `workers` workers, with one keeper shard
/// per worker. Give each worker's config the cluster and its rank with
/// `geeps_config_set_cluster`.
#[no_mangle]
pub extern "C" fn geeps_cluster_new(workers: usize, out: *mut *mut GeepsCluster) -> GeepsStatus {
    guard(|| {
        crate::marshal::clear_out(out);
        crate::marshal::require(out, "out")?;
        let cluster = InProcessCluster::new(workers)?;
        let taken = Mutex::new(vec![false; workers]);
        write_out(out, "out", CLUSTERS.insert(GeepsCluster { cluster, taken }))
    })
}

/// Frees a cluster handle. Configs and instances that use the cluster keep
/// it alive until they are freed. Freeing NULL does nothing.
#[no_mangle]
pub extern "C" fn geeps_cluster_free(cluster: *mut GeepsCluster) -> GeepsStatus {
    guard(|| {
        if !cluster.is_null() {
            CLUSTERS.remove(cluster, "cluster")?;
        }
        Ok(())
    })
}

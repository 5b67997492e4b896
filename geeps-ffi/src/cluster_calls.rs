//! The calls on a `geeps_cluster` of either kind: create an in-process one,
//! ask its rank and size, shut it down, free it. Marshalling only; the
//! rules of ranks and shutdown order are `cluster.rs`'s.

use geeps_core::InProcessCluster;

use crate::cluster::{GeepsCluster, CLUSTERS};
use crate::guard::guard;
use crate::marshal::{clear_out, require, write_out};
use crate::status::GeepsStatus;

/// Creates an in-process cluster of `workers` workers, with one keeper shard
/// per worker. Give each worker's config the cluster and its rank with
/// `geeps_config_set_cluster`.
#[no_mangle]
pub extern "C" fn geeps_cluster_new(workers: usize, out: *mut *mut GeepsCluster) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let cluster = InProcessCluster::new(workers)?;
        write_out(out, "out", CLUSTERS.insert(GeepsCluster::in_process(cluster)))
    })
}

/// This process's rank in a network cluster (`0 <= rank < world`): the rank
/// to give `geeps_config_set_cluster`. An in-process cluster has one rank
/// per worker and none of its own: `GEEPS_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn geeps_cluster_rank(cluster: *const GeepsCluster, out: *mut usize) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        write_out(out, "out", CLUSTERS.get(cluster, "cluster")?.own_rank()?)
    })
}

/// The number of workers in the cluster: the world size of a network
/// cluster, the `workers` of an in-process one.
#[no_mangle]
pub extern "C" fn geeps_cluster_world(cluster: *const GeepsCluster, out: *mut usize) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        write_out(out, "out", CLUSTERS.get(cluster, "cluster")?.workers())
    })
}

/// Shuts the cluster down and reports how that went. Every instance of this
/// process that joined it must be shut down first (`geeps_shutdown` or
/// `geeps_free`), else `GEEPS_STATUS_INVALID_STATE` and nothing happens.
/// A network cluster then waits until every worker of the cluster has left
/// this rank's keeper (up to the shutdown timeout, else
/// `GEEPS_STATUS_TIMEOUT` naming them) and stops the keeper. Afterwards no
/// instance can join the cluster (`GEEPS_STATUS_SHUT_DOWN`). Idempotent.
/// Optional: the last release of a cluster shuts it down as well, but can
/// only log a failure.
#[no_mangle]
pub extern "C" fn geeps_cluster_shutdown(cluster: *mut GeepsCluster) -> GeepsStatus {
    guard(|| CLUSTERS.get(cluster, "cluster")?.shutdown())
}

/// Frees a cluster handle. Configs and instances that use the cluster keep
/// it alive until they are freed; the last of these releases shuts a network
/// cluster down (see `geeps_cluster_shutdown`), after the instances, so that
/// call may wait for the other processes' workers to leave. Freeing NULL
/// does nothing.
#[no_mangle]
pub extern "C" fn geeps_cluster_free(cluster: *mut GeepsCluster) -> GeepsStatus {
    guard(|| {
        if !cluster.is_null() {
            CLUSTERS.remove(cluster, "cluster")?;
        }
        Ok(())
    })
}

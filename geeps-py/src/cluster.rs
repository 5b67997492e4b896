//! Clusters a Python process can join: `Cluster`, one rank of a network
//! cluster (from the environment that geeps-launch, torchrun, Slurm or
//! mpirun set, or from an address list), and `LocalCluster`, workers as
//! threads of this process. A cluster shuts its instances down before
//! itself. Marshalling only: bootstrap and keepers are geeps-net's.

use std::sync::{Arc, Weak};
use std::time::Duration;

use geeps_core::{Geeps, InProcessCluster, Transport};
use geeps_net::{ClusterSpec, NetCluster, NetOptions};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::errors::{blocking, guard, to_py};

/// One rank of a network cluster. Its keeper shard listens from creation;
/// instances built on it are shut down before it.
#[pyclass(module = "geeps._geeps", frozen)]
pub struct Cluster {
    net: Mutex<Option<NetCluster>>,
    rank: usize,
    world: usize,
    addresses: Vec<String>,
    instances: Mutex<Vec<Weak<Geeps>>>,
}

impl Cluster {
    fn wrap(net: NetCluster) -> Cluster {
        Cluster {
            rank: net.rank(),
            world: net.world(),
            addresses: net.addresses().to_vec(),
            net: Mutex::new(Some(net)),
            instances: Mutex::new(Vec::new()),
        }
    }

    /// The transport for an instance of this rank, which is remembered so
    /// that `shutdown` stops it first.
    pub fn transport(&self) -> PyResult<Arc<dyn Transport>> {
        match self.net.lock().as_ref() {
            Some(net) => Ok(net.transport()),
            None => Err(to_py(geeps_core::Error::ShutDown("this cluster is shut down".into()))),
        }
    }

    pub fn adopt(&self, instance: &Arc<Geeps>) {
        let mut list = self.instances.lock();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(instance));
    }

    pub fn rank_of(&self) -> usize {
        self.rank
    }
}

fn options(shutdown_timeout: Option<f64>, token: Option<String>) -> PyResult<NetOptions> {
    let mut o = NetOptions::default();
    if let Some(s) = shutdown_timeout {
        if !(s.is_finite() && s >= 0.0) {
            return Err(crate::errors::ArgumentError::new_err(format!(
                "shutdown_timeout must be a non-negative number of seconds, not {s}"
            )));
        }
        o = o.with_shutdown_timeout(Duration::from_secs_f64(s));
    }
    if let Some(t) = token {
        o = o.with_token(t);
    }
    Ok(o)
}

#[pymethods]
impl Cluster {
    /// Joins the cluster the environment describes, as this process's rank:
    /// geeps-launch (`GEEPS_RANK`, `GEEPS_WORLD_SIZE`, `GEEPS_RENDEZVOUS`),
    /// `GEEPS_HOSTS` or `GEEPS_HOSTFILE`, Slurm, Open MPI / PMI or torchrun
    /// (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`). Blocks until the
    /// rendezvous (if any) is complete.
    #[staticmethod]
    #[pyo3(signature = (*, shutdown_timeout=None))]
    fn from_env(py: Python<'_>, shutdown_timeout: Option<f64>) -> PyResult<Cluster> {
        let opts = options(shutdown_timeout, None)?;
        let net = blocking(py, move || NetCluster::start(ClusterSpec::from_env(opts)?))?;
        Ok(Cluster::wrap(net))
    }

    /// Joins a cluster of `len(addresses)` ranks as `rank`; `addresses[r]`
    /// (`"host:port"`) is rank r's keeper, and this rank listens on its own.
    #[staticmethod]
    #[pyo3(signature = (rank, addresses, *, shutdown_timeout=None, token=None))]
    fn connect(
        py: Python<'_>,
        rank: usize,
        addresses: Vec<String>,
        shutdown_timeout: Option<f64>,
        token: Option<String>,
    ) -> PyResult<Cluster> {
        let opts = options(shutdown_timeout, token)?;
        let net = blocking(py, move || NetCluster::start(ClusterSpec::fixed(rank, addresses, opts)))?;
        Ok(Cluster::wrap(net))
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    #[getter]
    fn world(&self) -> usize {
        self.world
    }

    /// Every rank's keeper address, in rank order (empty until known).
    #[getter]
    fn addresses(&self) -> Vec<String> {
        self.addresses.clone()
    }

    /// Shuts this rank's instances down, then waits (up to the shutdown
    /// timeout) until every worker has left this rank's keeper and stops it.
    /// Idempotent.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let instances: Vec<Arc<Geeps>> = self.instances.lock().drain(..).filter_map(|w| w.upgrade()).collect();
        for ps in instances {
            blocking(py, move || ps.shutdown())?;
        }
        let net = self.net.lock().take();
        match net {
            Some(mut net) => blocking(py, move || net.shutdown()),
            None => Ok(()),
        }
    }

    fn __repr__(&self) -> String {
        format!("Cluster(rank={}, world={})", self.rank, self.world)
    }
}

/// Workers as threads of this process (tests, single-machine experiments):
/// build one instance per rank, each on its own thread.
#[pyclass(module = "geeps._geeps", frozen)]
pub struct LocalCluster {
    inner: InProcessCluster,
    workers: usize,
}

impl LocalCluster {
    pub fn workers_count(&self) -> usize {
        self.workers
    }

    pub fn transport(&self, rank: usize) -> PyResult<Arc<dyn Transport>> {
        guard(|| self.inner.transport(rank).map_err(to_py))
    }
}

#[pymethods]
impl LocalCluster {
    /// A cluster of `workers` in-process workers.
    #[new]
    fn new(workers: usize) -> PyResult<LocalCluster> {
        guard(|| Ok(LocalCluster { inner: InProcessCluster::new(workers).map_err(to_py)?, workers }))
    }

    /// The number of workers.
    #[getter]
    fn workers(&self) -> usize {
        self.workers
    }

    fn __repr__(&self) -> String {
        format!("LocalCluster(workers={})", self.workers)
    }
}

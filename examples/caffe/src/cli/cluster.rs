//! The one place that decides how the workers of a run reach each other.
//! `Cluster::in_process(N)` runs every rank as a thread of this process on a
//! shared in-process geeps cluster; `Cluster::from_env()` makes this process
//! one rank of a multi-process cluster over the network (geeps-net), with
//! rank, world size and addresses from the environment (geeps-launch, srun,
//! mpirun, torchrun, GEEPS_*), its update deltas crossing the network as
//! f32 or bf16 (`--wire`, GEEPS_WIRE). `connect` returns a rank's transport and
//! `local_ranks` says which ranks this process runs; nothing else in the
//! trainer knows how many processes there are.

use std::sync::{Arc, Mutex};

use geeps::net::{ClusterSpec, NetCluster, NetOptions, WireEncoding};
use geeps::{InProcessCluster, Transport};

use crate::error::{Error, Result};

enum Link {
    InProcess(InProcessCluster),
    Net(Box<Mutex<NetCluster>>),
}

pub struct Cluster {
    world: usize,
    local: Vec<usize>,
    link: Link,
}

impl Cluster {
    /// `world` workers, all threads of this process.
    pub fn in_process(world: usize) -> Result<Cluster> {
        if world == 0 {
            return Err(Error::config("--workers must be at least 1"));
        }
        Ok(Cluster { world, local: (0..world).collect(), link: Link::InProcess(InProcessCluster::new(world)?) })
    }

    /// This process as one rank of a networked cluster described by the
    /// environment; starts this rank's keeper. `wire`, when given, overrides
    /// GEEPS_WIRE: how this rank's update deltas cross the network
    /// (GEEPS_PUBLISH_WIRE says how its keeper's publications do).
    pub fn from_env(wire: Option<WireEncoding>) -> Result<Cluster> {
        let mut spec = ClusterSpec::from_env(NetOptions::default())?;
        if let Some(wire) = wire {
            spec.options.wire = wire;
        }
        let (wire, publish) = (spec.options.wire, spec.options.publish_wire);
        tracing::info!(rank = spec.rank, %wire, %publish, "update deltas cross the network as {wire}, publications as {publish}");
        let net = NetCluster::start(spec)?;
        Ok(Cluster { world: net.world(), local: vec![net.rank()], link: Link::Net(Box::new(Mutex::new(net))) })
    }

    /// Whether the environment describes a multi-process run (set by
    /// geeps-launch, or by hand with GEEPS_RANK and GEEPS_WORLD_SIZE).
    pub fn in_environment() -> bool {
        std::env::var_os("GEEPS_RANK").is_some() || std::env::var_os("GEEPS_RENDEZVOUS").is_some()
    }

    /// Workers in the whole run.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The ranks this process runs, one thread each.
    pub fn local_ranks(&self) -> &[usize] {
        &self.local
    }

    /// The transport of worker `rank` (one of `local_ranks`).
    pub fn connect(&self, rank: usize) -> Result<Arc<dyn Transport>> {
        if !self.local.contains(&rank) {
            return Err(Error::config(format!("rank {rank} does not run in this process")));
        }
        match &self.link {
            Link::InProcess(c) => Ok(c.transport(rank)?),
            Link::Net(n) => Ok(n.lock().map_err(|_| Error::config("the network cluster is poisoned"))?.transport()),
        }
    }

    /// When the run ends with an error (`cause`), instead of `shutdown`:
    /// tells the other ranks at once that this rank failed, and why, unless
    /// it failed because another was lost first (networked runs only).
    pub fn fail(&self, cause: &str) {
        if let Link::Net(n) = &self.link {
            match n.lock() {
                Ok(mut n) => n.fail(cause),
                Err(poisoned) => poisoned.into_inner().fail(cause),
            }
        }
    }

    /// After every local worker has shut down: waits for the other ranks to
    /// leave this rank's keeper, then stops it (networked runs only).
    pub fn shutdown(&self) -> Result<()> {
        match &self.link {
            Link::InProcess(_) => Ok(()),
            Link::Net(n) => Ok(n.lock().map_err(|_| Error::config("the network cluster is poisoned"))?.shutdown()?),
        }
    }
}

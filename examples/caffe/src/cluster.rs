//! The one place that decides how the workers of a run reach each other.
//! Today every rank is a thread of this process and they share an
//! in-process geeps cluster; a network transport plugs in here (and only
//! here): `Cluster::connect` returns a rank's transport and `local_ranks`
//! says which ranks this process runs. Nothing else in the trainer knows
//! how many processes there are.

use std::sync::Arc;

use geeps::{InProcessCluster, Transport};

use crate::error::{Error, Result};

pub struct Cluster {
    world: usize,
    local: Vec<usize>,
    in_process: InProcessCluster,
}

impl Cluster {
    /// `world` workers, all threads of this process.
    pub fn in_process(world: usize) -> Result<Cluster> {
        if world == 0 {
            return Err(Error::config("--workers must be at least 1"));
        }
        Ok(Cluster { world, local: (0..world).collect(), in_process: InProcessCluster::new(world)? })
    }

    /// Workers in the whole run.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The ranks this process runs, one thread each.
    pub fn local_ranks(&self) -> &[usize] {
        &self.local
    }

    /// The transport of worker `rank`.
    pub fn connect(&self, rank: usize) -> Result<Arc<dyn Transport>> {
        Ok(self.in_process.transport(rank)?)
    }
}

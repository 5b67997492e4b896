//! Finding the cluster: this process's rank, the world size and every
//! keeper's address, from the environment, a hosts file, Slurm's host lists
//! or a rendezvous. It never serves a keeper or a worker.

mod environment;
pub(crate) mod hostlist;
pub(crate) mod reachability;
pub mod rendezvous;

pub use environment::{from_env, parse_hostfile, Addresses, Bootstrap, DEFAULT_PORT};

//! geeps-net: geeps across processes and machines.
//!
//! Every worker process hosts one keeper shard; partition `p` of every
//! parameter table belongs to the keeper of rank `p`. Workers connect to every
//! keeper over TCP; frames carry a prost header and raw little-endian `f32`
//! rows. Start with [`NetCluster::from_env`] (or [`NetCluster::start`] with an
//! explicit [`ClusterSpec`]), give [`NetCluster::transport`] to the
//! `GeepsBuilder`, and shut the `Geeps` instance down before the cluster.

mod bootstrap;
mod cluster;
mod conn;
mod frame;
mod hostlist;
mod keeper_service;
mod net_transport;
mod options;
pub mod rendezvous;
pub mod wire;

pub use bootstrap::{from_env as bootstrap_from_env, parse_hostfile, Addresses, Bootstrap, DEFAULT_PORT};
pub use cluster::{ClusterSpec, NetCluster};
pub use frame::{read_frame, write_frame, FrameError, MAX_HEADER_BYTES};
pub use hostlist::{expand_hostlist, expand_tasks_per_node};
pub use options::NetOptions;

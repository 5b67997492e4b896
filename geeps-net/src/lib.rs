//! geeps-net: geeps across processes and machines.
//!
//! Every worker process hosts one keeper shard; partition `p` of every
//! parameter table belongs to the keeper of rank `p`. Workers connect to every
//! keeper over TCP; frames carry a prost header and raw little-endian `f32`
//! rows (update deltas as `bf16` with [`WireEncoding::Bf16`]). Start with
//! [`NetCluster::from_env`] (or [`NetCluster::start`] with an explicit
//! [`ClusterSpec`]), give [`NetCluster::transport`] to the `GeepsBuilder`,
//! and shut the `Geeps` instance down before the cluster.
//! Ranks on one host move their data through shared memory
//! ([`NetOptions::with_shared_memory`], on by default), falling back to TCP.
//! With the `tls` feature, keeper connections can use mutual TLS
//! ([`NetOptions::with_tls`]).

#![warn(missing_docs)]

#[cfg(feature = "admin")]
mod admin;
#[cfg(all(test, feature = "admin"))]
mod admin_tests;
mod auth;
#[cfg(test)]
mod bf16_cluster_tests;
mod bf16_wire;
#[cfg(test)]
mod bf16_wire_tests;
mod bootstrap;
mod cluster;
mod conn;
mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
mod hardening_tests;
mod hostlist;
mod keeper_service;
#[cfg(test)]
mod local_shard_tests;
mod net_transport;
mod options;
mod peer_stream;
mod recv_pool;
pub mod rendezvous;
mod shm_ring;
mod shm_segment;
mod shm_stream;
#[cfg(test)]
mod shm_tests;
#[cfg(test)]
mod test_rendezvous;
mod tls;
#[cfg(all(test, feature = "tls"))]
mod tls_tests;
mod wire;
#[cfg(test)]
mod wire_errors_tests;

pub use bootstrap::{from_env as bootstrap_from_env, parse_hostfile, Addresses, Bootstrap, DEFAULT_PORT};
pub use cluster::{ClusterSpec, NetCluster};
pub use hostlist::{expand_hostlist, expand_tasks_per_node};
pub use options::{NetOptions, WireEncoding};
pub use tls::TlsFiles;

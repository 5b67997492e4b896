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
mod bootstrap;
mod cluster;
mod conn;
pub mod failure_report;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
#[path = "../fuzz/fuzzing.rs"]
pub mod fuzzing;
mod keeper;
mod options;
mod security;
mod shm;
#[cfg(test)]
#[path = "../tests/unit/test_rendezvous.rs"]
mod test_rendezvous;
mod wire;
mod worker;

pub use bootstrap::hostlist::{expand_hostlist, expand_tasks_per_node};
pub use bootstrap::rendezvous;
pub use bootstrap::{from_env as bootstrap_from_env, parse_hostfile, Addresses, Bootstrap, DEFAULT_PORT};
pub use cluster::{ClusterSpec, NetCluster};
pub use options::{NetOptions, WireEncoding};
pub use security::tls::TlsFiles;

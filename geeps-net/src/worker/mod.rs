//! The worker side of the network transport: one connection to every keeper
//! shard, pushing update batches and receiving publications. It never
//! accepts a connection: keepers serve, workers dial.

mod publications;
mod send_window;
mod transport;

pub(crate) use transport::NetTransport;

#[cfg(test)]
#[path = "../../tests/unit/bf16_cluster_tests.rs"]
mod bf16_cluster_tests;
#[cfg(all(test, target_os = "linux"))]
#[path = "../../tests/unit/congestion_cluster_tests.rs"]
mod congestion_cluster_tests;
#[cfg(test)]
#[path = "../../tests/unit/local_shard_tests.rs"]
mod local_shard_tests;
#[cfg(test)]
#[path = "../../tests/unit/stripes_cluster_tests.rs"]
mod stripes_cluster_tests;

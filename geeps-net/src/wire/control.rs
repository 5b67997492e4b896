//! The control messages of a joined connection: leaving, failures, the
//! heartbeat, a worker's status report, and an operator's drain and
//! checkpoint requests relayed by the keeper. Schema only.

/// A worker leaves the cluster on purpose.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Leave {
    #[prost(uint32, tag = "1")]
    pub rank: u32,
}

/// Keeper to worker: a batch was rejected, a peer was lost, or a rank was
/// refused at join.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Failure {
    /// A [`FailureKind`](super::FailureKind) number.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    #[prost(uint32, tag = "2")]
    pub rank: u32,
    #[prost(string, tag = "3")]
    pub address: String,
    #[prost(string, tag = "4")]
    pub message: String,
}

/// Keeps an idle connection alive; its absence for the peer timeout means the peer is lost.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Ping {}

/// Worker to keeper 0, once a heartbeat interval: what the admin endpoint
/// reports about this rank.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WorkerStatus {
    #[prost(double, tag = "1")]
    pub wall_seconds: f64,
    #[prost(double, tag = "2")]
    pub blocked_seconds: f64,
    #[prost(double, tag = "3")]
    pub stall_fraction: f64,
    #[prost(uint64, tag = "4")]
    pub bytes_host_to_device: u64,
    #[prost(uint64, tag = "5")]
    pub bytes_device_to_host: u64,
    #[prost(uint64, tag = "6")]
    pub slow_path_calls: u64,
}

/// Keeper to worker: an operator asked the cluster to drain (stop at the
/// next clock boundary).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Drain {}

/// Keeper to worker: an operator asked for a checkpoint; `sequence` counts
/// the requests so far (a rank joining late hears the latest).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CheckpointRequest {
    #[prost(uint64, tag = "1")]
    pub sequence: u64,
}

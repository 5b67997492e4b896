//! The wire protocol: prost-encoded headers, one per frame, followed by the
//! frame's raw payload (dense little-endian `f32` rows, or `bf16` update
//! deltas when the update header says so). These types are the
//! protocol's schema; bump `PROTOCOL_VERSION` when they change meaning.

/// Checked at join: a worker and a keeper of different versions refuse each other.
/// 4: update headers carry the deltas' encoding (f32 or bf16).
/// 5: hellos carry the host's identity, welcomes may offer a shared-memory
/// segment, and a worker answers an offer with `ShmAttached`.
/// 6: a shared-memory ring's large writes may go by reference (the reader
/// copies them from the writer's process).
pub const PROTOCOL_VERSION: u32 = 6;

/// [`UpdateHeader::encoding`]: little-endian f32, 4 bytes a value.
pub const ENCODING_F32: u32 = 0;
/// [`UpdateHeader::encoding`]: little-endian bf16, 2 bytes a value.
pub const ENCODING_BF16: u32 = 1;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    /// Bytes of raw payload following the header.
    #[prost(uint64, tag = "1")]
    pub payload_len: u64,
    #[prost(oneof = "Body", tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15")]
    pub body: Option<Body>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Body {
    #[prost(message, tag = "2")]
    Hello(Hello),
    #[prost(message, tag = "3")]
    Welcome(Welcome),
    #[prost(message, tag = "4")]
    Refused(Refused),
    #[prost(message, tag = "5")]
    Update(UpdateHeader),
    #[prost(message, tag = "6")]
    Publish(PublishHeader),
    #[prost(message, tag = "7")]
    Leave(Leave),
    #[prost(message, tag = "8")]
    Failure(Failure),
    #[prost(message, tag = "9")]
    Ping(Ping),
    #[prost(message, tag = "10")]
    Register(Register),
    #[prost(message, tag = "11")]
    Roster(Roster),
    #[prost(message, tag = "12")]
    Status(WorkerStatus),
    #[prost(message, tag = "13")]
    Drain(Drain),
    #[prost(message, tag = "14")]
    Checkpoint(CheckpointRequest),
    #[prost(message, tag = "15")]
    ShmAttached(ShmAttached),
}

/// A worker's first frame to a keeper.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hello {
    #[prost(uint32, tag = "1")]
    pub protocol: u32,
    #[prost(string, tag = "2")]
    pub token: String,
    #[prost(uint32, tag = "3")]
    pub rank: u32,
    #[prost(uint32, tag = "4")]
    pub world: u32,
    #[prost(uint32, tag = "5")]
    pub row_width: u32,
    #[prost(message, repeated, tag = "6")]
    pub tables: Vec<TableDecl>,
    /// This host's identity (boot id and host name) when the worker would
    /// take a shared-memory segment from a keeper on the same host; empty
    /// when it would not (shared memory off, TLS).
    #[prost(string, tag = "7")]
    pub host: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TableDecl {
    #[prost(string, tag = "1")]
    pub name: String,
    /// 0 = parameter, 1 = local.
    #[prost(uint32, tag = "2")]
    pub kind: u32,
    #[prost(uint32, tag = "3")]
    pub rows: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Welcome {
    #[prost(uint32, tag = "1")]
    pub shard: u32,
    /// The file name (no directory) of a shared-memory segment the keeper
    /// created for this connection; empty: none offered. The worker answers
    /// an offer with `ShmAttached` before anything else.
    #[prost(string, tag = "2")]
    pub shm_name: String,
}

/// A worker's answer to a shared-memory offer: the nonce it read in the
/// segment (proof that it mapped the keeper's segment), or 0 when it could
/// not open it (the connection then stays on TCP).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShmAttached {
    #[prost(uint64, tag = "1")]
    pub nonce: u64,
}

/// Join refused; the reason says what to fix.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Refused {
    #[prost(string, tag = "1")]
    pub reason: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateHeader {
    #[prost(uint32, tag = "1")]
    pub table: u32,
    #[prost(uint32, tag = "2")]
    pub partition: u32,
    #[prost(uint32, tag = "3")]
    pub worker: u32,
    #[prost(uint64, tag = "4")]
    pub clock: u64,
    /// False when the batch only ends the clock (no payload).
    #[prost(bool, tag = "5")]
    pub has_deltas: bool,
    /// How the deltas are encoded: [`ENCODING_F32`] (the default, so an f32
    /// batch encodes as it did before the field) or [`ENCODING_BF16`].
    #[prost(uint32, tag = "6")]
    pub encoding: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PublishHeader {
    #[prost(uint32, tag = "1")]
    pub table: u32,
    #[prost(uint32, tag = "2")]
    pub partition: u32,
    #[prost(uint64, tag = "3")]
    pub age: u64,
    #[prost(uint64, repeated, tag = "4")]
    pub included: Vec<u64>,
}

/// A worker leaves the cluster on purpose.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Leave {
    #[prost(uint32, tag = "1")]
    pub rank: u32,
}

/// Keeper to worker: a batch was rejected, a peer was lost, or a rank was
/// refused at join.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Failure {
    /// 0 = rejected batch, 1 = peer lost, 2 = rank refused at join.
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
pub struct Ping {}

/// Worker to keeper 0, once a heartbeat interval: what the admin endpoint
/// reports about this rank.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WorkerStatus {
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
pub struct Drain {}

/// Keeper to worker: an operator asked for a checkpoint; `sequence` counts
/// the requests so far (a rank joining late hears the latest).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckpointRequest {
    #[prost(uint64, tag = "1")]
    pub sequence: u64,
}

/// Rendezvous: a rank announces where its keeper listens.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Register {
    #[prost(uint32, tag = "1")]
    pub protocol: u32,
    #[prost(string, tag = "2")]
    pub token: String,
    #[prost(uint32, tag = "3")]
    pub rank: u32,
    #[prost(uint32, tag = "4")]
    pub world: u32,
    #[prost(string, tag = "5")]
    pub address: String,
}

/// Rendezvous: every rank's keeper address, by rank.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Roster {
    #[prost(string, repeated, tag = "1")]
    pub addresses: Vec<String>,
}

impl Header {
    pub fn new(body: Body) -> Self {
        Header { payload_len: 0, body: Some(body) }
    }
}

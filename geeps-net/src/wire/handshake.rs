//! The messages of a worker joining a keeper: its hello and the tables it
//! declares, the keeper's welcome (with any shared-memory offer) or refusal,
//! and the worker's answer to the offer. Schema only; checking a hello is
//! the keeper's job.

/// A worker's first frame to a keeper.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Hello {
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
    /// Partitions of each table per keeper (`NetOptions::stripes`); every
    /// rank must give the same.
    #[prost(uint32, tag = "8")]
    pub stripes: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TableDecl {
    #[prost(string, tag = "1")]
    pub name: String,
    /// A [`DeclaredKind`](super::DeclaredKind) number.
    #[prost(uint32, tag = "2")]
    pub kind: u32,
    #[prost(uint32, tag = "3")]
    pub rows: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Welcome {
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
pub(crate) struct ShmAttached {
    #[prost(uint64, tag = "1")]
    pub nonce: u64,
}

/// Join refused; the reason says what to fix.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Refused {
    #[prost(string, tag = "1")]
    pub reason: String,
}

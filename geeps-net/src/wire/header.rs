//! The header every frame starts with: the protocol version peers check
//! at join, the payload length, and which message the frame carries. It
//! only names the messages; their fields live with their job.

use super::control::{CheckpointRequest, Drain, Failure, Leave, Ping, WorkerStatus};
use super::handshake::{Hello, Refused, ShmAttached, Welcome};
use super::rendezvous::{Register, Roster};
use super::rows::{PublishHeader, UpdateHeader};

/// Checked at join: a worker and a keeper of different versions refuse each other.
/// 4: update headers carry the deltas' encoding (f32 or bf16).
/// 5: hellos carry the host's identity, welcomes may offer a shared-memory
/// segment, and a worker answers an offer with `ShmAttached`.
/// 6: a shared-memory ring's large writes may go by reference (the reader
/// copies them from the writer's process).
/// 7: publications carry their rows' encoding (f32 rows, or bf16 changes
/// since the last ones), and hellos the stripes per keeper.
pub(crate) const PROTOCOL_VERSION: u32 = 7;

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Header {
    /// Bytes of raw payload following the header.
    #[prost(uint64, tag = "1")]
    pub payload_len: u64,
    #[prost(oneof = "Body", tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15")]
    pub body: Option<Body>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum Body {
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

impl Header {
    pub(crate) fn new(body: Body) -> Self {
        Header { payload_len: 0, body: Some(body) }
    }
}

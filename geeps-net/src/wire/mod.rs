//! The wire: the messages peers exchange and their numbered kinds, how a
//! frame sits on a byte stream, the buffers frame payloads are read into,
//! and the bf16 encodings of update deltas and of publications. Everything
//! here is bytes and schema: it never opens a connection and never knows a
//! keeper or a worker.

pub(crate) mod bf16;
pub(crate) mod bf16_rows;
mod control;
pub(crate) mod frame;
mod handshake;
mod header;
mod kinds;
pub(crate) mod recv_pool;
mod rendezvous;
mod rows;
mod tables;

pub(crate) use control::{CheckpointRequest, Drain, Failure, Leave, Ping, WorkerStatus};
pub(crate) use handshake::{Hello, Refused, ShmAttached, TableDecl, Welcome};
pub(crate) use header::{Body, Header, PROTOCOL_VERSION};
#[cfg(test)]
pub(crate) use kinds::DeclaredKind;
pub(crate) use kinds::{Encoding, FailureKind};
pub(crate) use rendezvous::{Register, Roster};
pub(crate) use rows::{PublishHeader, UpdateHeader};
pub(crate) use tables::{table_decls, table_specs};

//! The wire: the messages peers exchange and their kinds, how a frame sits
//! on a byte stream, the buffers frame payloads are read into, and the bf16
//! encoding of update deltas. Everything here is bytes and schema: it never
//! opens a connection and never knows a keeper or a worker.

pub(crate) mod bf16;
pub(crate) mod frame;
mod messages;
pub(crate) mod recv_pool;

pub(crate) use messages::*;

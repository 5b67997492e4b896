//! Shared memory between ranks on one host: the segment a keeper creates for
//! one connection, the byte rings inside it, and the stream halves that move
//! a connection's frames through them. It never speaks the wire protocol.

pub(crate) mod ring;
pub(crate) mod segment;
#[cfg(test)]
#[path = "../../tests/unit/shm_tests.rs"]
mod shm_tests;
pub(crate) mod stream;

//! The messages between a worker and the keeper shards: a worker's deltas
//! for one partition and clock, a keeper's publication of fresh rows, and
//! what a transport delivers to a worker's inbox. Plain data: rows travel as
//! dense little-endian bytes; nothing here sends or applies anything.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Error;
use crate::transport::delta_encoding::DeltaEncoding;

/// The deltas one worker made to one partition of a table during one clock.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateBatch {
    /// The table's id.
    pub table: u32,
    /// The partition (keeper shard) of the table.
    pub partition: u32,
    /// The sending worker's rank.
    pub worker: u32,
    /// The clock this batch ends (the worker's clocks on the table so far).
    pub clock: u64,
    /// Dense deltas for every row of the partition, or `None` when the worker
    /// touched nothing during the clock (the batch then only ticks the clock).
    pub deltas: Option<Bytes>,
    /// How `deltas` are laid out (the engine's are f32; a compressed wire
    /// may hand its keeper bf16 to add as they are).
    pub encoding: DeltaEncoding,
}

/// Fresh rows of one partition of a table, published when its data age advances.
#[derive(Debug, Clone, PartialEq)]
pub struct Publish {
    /// The table's id.
    pub table: u32,
    /// The partition (keeper shard) of the table.
    pub partition: u32,
    /// The data age: every worker's updates of clocks `< age` are included.
    pub age: u64,
    /// The keeper's vector clock at publication: entry `w` counts the clocks of
    /// worker `w` included in `rows` (used for read-my-writes).
    pub included: Vec<u64>,
    /// Dense rows of the partition.
    pub rows: Bytes,
}

/// What a transport delivers to a worker.
#[derive(Debug, Clone)]
pub enum Inbound {
    /// Rows a keeper published.
    Rows(Publish),
    /// The cluster failed (peer lost, protocol error); every blocked call fails with it.
    Failed(Error),
}

/// Receives what the keepers send to one worker. Must not block for long.
pub type Inbox = Arc<dyn Fn(Inbound) + Send + Sync>;

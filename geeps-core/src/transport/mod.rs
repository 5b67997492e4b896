//! The `Transport` trait: how a worker's pushers reach the keeper shards and
//! how published rows reach its pullers. Core knows only this trait; the
//! in-process transport lives here, the network one in geeps-net.
//!
//! Messages carry rows as raw little-endian `f32` bytes, dense over one
//! partition: no per-row messages, no per-value encoding (update deltas may
//! instead be bf16, [`DeltaEncoding`], for a compressed wire).

mod delta_encoding;
pub(crate) mod in_process;
mod landing;

pub use delta_encoding::DeltaEncoding;
pub(crate) use delta_encoding::{add_all, check_deltas};
pub use in_process::InProcessCluster;
pub use landing::{Landing, LandingSlot};

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::table::TableSpec;

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

/// Connects one worker to the keeper shards of its cluster.
pub trait Transport: Send + Sync {
    /// This worker's rank in `0..num_workers()`.
    fn rank(&self) -> usize;
    /// The number of workers in the cluster.
    fn num_workers(&self) -> usize;
    /// Keeper shards; every parameter table has one partition per shard.
    fn num_shards(&self) -> usize;
    /// Declares this worker's tables and starts delivery to `inbox`. A worker
    /// whose row width or tables differ from the cluster's is refused.
    fn join(&self, row_width: usize, tables: &[TableSpec], inbox: Inbox) -> Result<()>;
    /// Sends a batch to the keeper owning its partition. Batches of one
    /// partition must reach the keeper in the order they were pushed.
    fn push(&self, batch: UpdateBatch) -> Result<()>;
    /// True when `push` only queues the batch (it never waits on the network
    /// or applies the deltas itself): the engine then pushes straight from
    /// its reclaimer instead of handing each batch to a pusher thread.
    fn push_only_queues(&self) -> bool {
        false
    }
    /// Leaves the cluster: this worker no longer holds back the data age.
    fn leave(&self);
    /// Offers table-wide buffers to read publications' payloads into
    /// ([`Landing::slot`]), so whole-table reads need no gather. The
    /// instance calls it once it runs, for the tables it reads that way; a
    /// transport that ignores it (the default) loses nothing but the saving.
    fn attach_landing(&self, _landing: Landing) {}
    /// Gives the transport a way to read this worker's statistics, for a
    /// cluster that reports on itself (geeps-net's admin endpoint). The
    /// instance calls it once it runs; by default it is ignored.
    fn attach_stats(&self, _stats: StatsSource) {}
    /// How many checkpoints an operator has asked the cluster for so far
    /// (geeps-net's admin endpoint); a worker that sees it grow should
    /// checkpoint at a clock boundary the workers agree on. By default 0.
    fn checkpoint_requests(&self) -> u64 {
        0
    }
    /// Whether an operator asked the cluster to drain: every worker should
    /// stop at its next clock boundary (after a checkpoint, if it keeps
    /// them). By default never.
    fn drain_requested(&self) -> bool {
        false
    }
}

/// Reads a worker's statistics as of now (see [`Transport::attach_stats`]).
pub type StatsSource = std::sync::Arc<dyn Fn() -> crate::Stats + Send + Sync>;

/// Checks that a payload holds exactly `floats` floats.
pub(crate) fn check_payload(bytes: &[u8], floats: usize) -> Result<()> {
    if bytes.len() != floats * 4 {
        return Err(Error::Mismatch(format!("row payload of {} bytes, expected {}", bytes.len(), floats * 4)));
    }
    Ok(())
}

/// Floats viewed as their in-memory bytes (little-endian on the hosts where
/// callers hand them out as `Bytes` without copying).
pub(crate) fn float_bytes(values: &[f32]) -> &[u8] {
    bytemuck::cast_slice(values)
}

/// Converts dense little-endian bytes to floats (one memcpy on little-endian hosts).
pub(crate) fn floats_from_bytes(bytes: &[u8], out: &mut [f32]) -> Result<()> {
    check_payload(bytes, out.len())?;
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice_mut::<f32, u8>(out).copy_from_slice(bytes);
    } else {
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    }
    Ok(())
}

/// Views dense little-endian bytes as floats without copying, when the host
/// is little-endian and the bytes are aligned (payloads read into their own
/// buffer and vectors of floats always are).
pub(crate) fn floats_view(bytes: &[u8]) -> Option<&[f32]> {
    le_view(bytes)
}

/// Dense little-endian bytes viewed as words of `T` without copying, where
/// the host is little-endian and the bytes are aligned for `T`.
pub(crate) fn le_view<T: bytemuck::Pod>(bytes: &[u8]) -> Option<&[T]> {
    if cfg!(target_endian = "little") {
        bytemuck::try_cast_slice(bytes).ok()
    } else {
        None
    }
}

/// Adds dense little-endian deltas to `values`.
pub(crate) fn add_bytes(values: &mut [f32], bytes: &[u8]) -> Result<()> {
    check_payload(bytes, values.len())?;
    delta_encoding::add_unchecked(values, bytes, DeltaEncoding::F32);
    Ok(())
}

/// Floats owned as bytes, for `Bytes::from_owner`.
struct FloatBytes(Vec<f32>);

impl AsRef<[u8]> for FloatBytes {
    fn as_ref(&self) -> &[u8] {
        float_bytes(&self.0)
    }
}

/// Shared floats owned as bytes, for `Bytes::from_owner`.
struct SharedFloatBytes(Arc<Vec<f32>>);

impl AsRef<[u8]> for SharedFloatBytes {
    fn as_ref(&self) -> &[u8] {
        // Nobody mutates the floats while shared: writers use `Arc::make_mut`.
        float_bytes(&self.0)
    }
}

/// Views shared floats as `Bytes` without copying (little-endian hosts; a
/// converting copy elsewhere). The floats stay shared until the bytes drop.
pub(crate) fn bytes_from_shared(values: Arc<Vec<f32>>) -> Bytes {
    if cfg!(target_endian = "little") {
        Bytes::from_owner(SharedFloatBytes(values))
    } else {
        bytes_from_floats(&values)
    }
}

/// Copies floats into dense little-endian bytes.
pub(crate) fn bytes_from_floats(values: &[f32]) -> Bytes {
    if cfg!(target_endian = "little") {
        return Bytes::from_owner(FloatBytes(values.to_vec()));
    }
    let mut v = Vec::with_capacity(values.len() * 4);
    for f in values {
        v.extend_from_slice(&f.to_le_bytes());
    }
    Bytes::from(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_copy_views_and_adds() {
        let b = bytes_from_floats(&[1.0, 2.0, 3.0]);
        assert_eq!(floats_view(&b).unwrap(), &[1.0, 2.0, 3.0]);
        let mut v = [10.0f32; 3];
        add_bytes(&mut v, &b).unwrap();
        assert_eq!(v, [11.0, 12.0, 13.0]);
        // Misaligned bytes still add correctly, through the converting path.
        let mut raw = [0u8; 13];
        raw[1..].copy_from_slice(&b);
        let mut v = [0.0f32; 3];
        add_bytes(&mut v, &raw[1..]).unwrap();
        assert_eq!(v, [1.0, 2.0, 3.0]);
        assert!(add_bytes(&mut v, &raw[..5]).is_err());
    }

    #[test]
    fn float_bytes_roundtrip_and_length_check() {
        let v = [1.5f32, -2.0, f32::MAX];
        let b = bytes_from_floats(&v);
        let mut out = [0.0; 3];
        floats_from_bytes(&b, &mut out).unwrap();
        assert_eq!(out, v);
        assert!(floats_from_bytes(&b[1..], &mut out).is_err());
    }
}

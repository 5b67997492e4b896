//! The `Transport` trait: how a worker's pushers reach the keeper shards and
//! how published rows reach its pullers. The engine knows only this trait;
//! it must never name an implementation.

use crate::error::Result;
use crate::stats::Stats;
use crate::table::TableSpec;
use crate::transport::landing::Landing;
use crate::transport::messages::{Inbox, UpdateBatch};

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
pub type StatsSource = std::sync::Arc<dyn Fn() -> Stats + Send + Sync>;

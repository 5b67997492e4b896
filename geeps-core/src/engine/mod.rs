//! The engine shared by an instance's threads: the shared state and what an
//! acquisition yields, the stores and the gather index, the buffer pool, the
//! data path split by job (`fill`, `push`, `pull`, with host staging and
//! cache writes), and one file per thread (allocator, reclaimer, pusher,
//! puller). Nothing here is visible outside the crate.

pub(crate) mod accumulators;
pub(crate) mod acquired;
pub(crate) mod allocator;
pub(crate) mod buffer_pool;
pub(crate) mod cache_write;
pub(crate) mod fill;
pub(crate) mod index;
pub(crate) mod outgoing;
pub(crate) mod pull;
pub(crate) mod puller;
pub(crate) mod push;
pub(crate) mod pusher;
pub(crate) mod reclaimer;
pub(crate) mod shared;
pub(crate) mod staging;
pub(crate) mod store;
pub(crate) mod write_counts;

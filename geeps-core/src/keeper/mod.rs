//! The keeper: one shard's parameter rows, the vector clock of each table,
//! the order batches are applied in, and publication when a data age
//! advances. Transport-agnostic: the in-process transport and geeps-net's
//! keeper service both host a [`KeeperShard`]. Only the shard is public;
//! this module must never know how messages travel.

mod apply_order;
mod rows;
mod shard;
mod vector_clock;

pub use shard::KeeperShard;

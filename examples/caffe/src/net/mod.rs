//! A net for one phase and what runs it (Caffe's `Net`): its layers wired
//! by blob name (`wiring`, with Caffe's automatic Split layers from
//! `insert_splits`), the one calling convention of a layer (`layer_call`),
//! its learnable parameters (`params`), running it on plain memory
//! (`plain`), filling a data layer's tops (`data_feed`) and refusing one
//! that cannot fit (`memory`). This file only
//! declares the modules and re-exports; it must never define an item.

pub mod data_feed;
mod infogain_source;
pub mod insert_splits;
mod layer_call;
pub mod memory;
pub mod params;
pub mod plain;
mod sharing;
mod wiring;

pub use layer_call::{backward_layer, forward_layer, Io};
pub use wiring::{Blob, DataSource, Net, NetLayer};

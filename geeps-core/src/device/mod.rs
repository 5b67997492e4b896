//! The seam between the engine and the hardware, shaped for an asynchronous
//! GPU: device allocations, page-locked host staging, copies and kernels
//! enqueued on streams, and events to order them.
//!
//! This is the thin unsafe edge of geeps: methods that touch memory take raw
//! device addresses and are `unsafe`; the engine above owns every address it
//! passes and guarantees the ranges are live and not used concurrently. This
//! module must never hold engine state or know which backend it talks to.

mod capacity;
mod device_trait;
mod handles;
pub(crate) mod host;
mod pinned;

pub use capacity::CapacityMeter;
pub use device_trait::{Device, DeviceInfo};
pub use handles::{DevicePtr, EventId, IndexId, RowOp, RowPair, StreamId};
pub use host::HostDevice;
pub use pinned::PinnedBuf;

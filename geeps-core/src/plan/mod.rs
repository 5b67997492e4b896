//! Planning from the virtual iteration: the recorder that checks and
//! appends each virtual call, the hand-overs found in the recording, and
//! the placement planner that sizes device memory. It decides where rows
//! live and how big the pool is; it never allocates or moves data.

pub(crate) mod handover;
pub(crate) mod planner;
mod range_max;
pub(crate) mod recorder;

pub use planner::{Plan, TablePlacement};
pub use recorder::Handle;

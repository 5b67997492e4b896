//! libgeeps: the C ABI of geeps (`include/geeps.h` is generated from this
//! crate by cbindgen). It owns marshalling only: C pointers and integers in,
//! status codes and C values out, and the tables that turn C handles into
//! the engine's objects. Every rule about parameters, clocks and buffers is
//! the engine's (`geeps-core`); this crate must never make one of its own.
//!
//! Every exported function returns a [`GeepsStatus`] (the three that return
//! strings are documented as such), catches panics, and records the message
//! of a failure in a thread-local string read by `geeps_last_error_message`.

// Plain handle types, constants and geeps_version, declared first: cbindgen
// emits items in source order, and the header lists these before the rest.
mod handles;
mod version;

// Internals.
mod cluster;
mod held;
mod instance;
mod marshal;
mod registry;

// The exported functions, in the order the header presents them.
mod status;

mod guard;

mod config;

mod cuda;

mod cluster_calls;

mod net_options;

mod net_cluster;

mod lifecycle;

mod virtual_calls;

mod buffers;

mod real_calls;
// geeps_checkpoint, geeps_restore, geeps_restored_state.
mod checkpoint_calls;

mod keyed_calls;

mod report;

mod logging;

pub use buffers::GeepsBuffer;
pub use cluster::GeepsCluster;
pub use config::GeepsConfig;
pub use handles::{GeepsHandle, GeepsTable, GEEPS_INVALID_HANDLE, GEEPS_SLACK_BSP, GEEPS_SLACK_UNBOUNDED};
pub use instance::GeepsInstance;
pub use net_options::GeepsNetOptions;
pub use report::{GeepsCallKind, GeepsCallStats, GeepsPlan, GeepsStats};
pub use status::GeepsStatus;

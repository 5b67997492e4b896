//! libgeeps: the C ABI of geeps (`include/geeps.h` is generated from this
//! crate by cbindgen). It owns marshalling only: C pointers and integers in,
//! status codes and C values out, and the tables that turn C handles into
//! the engine's objects. Every rule about parameters, clocks and buffers is
//! the engine's (`geeps-core`); this crate must never make one of its own.
//!
//! Every exported function returns a [`GeepsStatus`] (the three that return
//! strings are documented as such), catches panics, and records the message
//! of a failure in a thread-local string read by `geeps_last_error_message`.

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
pub use instance::GeepsInstance;
pub use net_options::GeepsNetOptions;
pub use report::{GeepsCallKind, GeepsCallStats, GeepsPlan, GeepsStats};
pub use status::GeepsStatus;

/// A recorded call of one instance, as returned by the `geeps_virtual_*`
/// acquisitions. Never 0 for a valid handle.
pub type GeepsHandle = u64;

/// A table of one instance, numbered from 0 in declaration order.
pub type GeepsTable = u32;

/// A handle value that no call ever returns.
pub const GEEPS_INVALID_HANDLE: GeepsHandle = 0;

/// Slack of a bulk-synchronous read: see every update of every earlier clock.
pub const GEEPS_SLACK_BSP: u32 = 0;

/// Slack of an asynchronous read: never wait for fresher data.
pub const GEEPS_SLACK_UNBOUNDED: u32 = u32::MAX;

/// The library's version, `MAJOR.MINOR.PATCH`, as a static NUL-terminated
/// string. It does not return a status.
#[no_mangle]
pub extern "C" fn geeps_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

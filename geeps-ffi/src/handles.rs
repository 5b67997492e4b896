//! The C ABI's plain handle types and constants: recorded calls, tables,
//! the invalid handle and the two slack values. Leaf definitions only: this
//! file never imports another of the crate.

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

//! The one error type of geeps. Every variant says what went wrong and what to
//! fix; nothing in the library panics on bad input, it returns one of these.

use crate::table::RowKey;

/// Result alias used across geeps.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in geeps.
///
/// New variants may come in a minor release: match the ones you handle and
/// keep a `_` arm.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A configuration field holds a value geeps cannot use.
    #[error("invalid config `{field}`: {reason}")]
    InvalidConfig {
        /// The field, as spelled in [`Config`](crate::Config).
        field: &'static str,
        /// What is wrong with its value and what to use instead.
        reason: String,
    },

    /// A table id that was never declared on this instance.
    #[error("unknown table {table} (this instance declares {declared} tables)")]
    UnknownTable {
        /// The table id passed.
        table: u32,
        /// How many tables the instance declares.
        declared: usize,
    },

    /// A row outside the declared row count of its table.
    #[error("row {key} is out of range: table `{table_name}` has {rows} rows")]
    UnknownRow {
        /// The key passed.
        key: RowKey,
        /// The name its table was declared with.
        table_name: String,
        /// The rows the table has.
        rows: u32,
    },

    /// The keys of one access are not usable together.
    #[error("invalid keys: {0}")]
    InvalidKeys(String),

    /// A handle or buffer used in a state where that call is not allowed.
    #[error("invalid handle: {0}")]
    InvalidHandle(String),

    /// A call made in the wrong phase of the instance's life.
    #[error("`{call}` is not allowed while the instance is {state}: {hint}")]
    InvalidState {
        /// The call made.
        call: &'static str,
        /// The phase the instance is in.
        state: &'static str,
        /// What to do instead.
        hint: &'static str,
    },

    /// The device memory budget cannot hold what the recorded iteration needs.
    #[error("device memory budget of {budget} bytes is too small: {what} needs {needed} bytes; raise `device_memory` to at least {needed}")]
    BudgetTooSmall {
        /// The budget, in bytes.
        budget: usize,
        /// The bytes needed.
        needed: usize,
        /// What needs them.
        what: &'static str,
    },

    /// A device allocation failed.
    #[error("device out of memory: asked for {requested} bytes with {available} of {capacity} free")]
    DeviceOutOfMemory {
        /// Bytes asked for.
        requested: usize,
        /// Bytes free at the time.
        available: usize,
        /// The device's capacity in bytes.
        capacity: usize,
    },

    /// The device backend reported a failure (driver, kernel launch, copy).
    #[error("device error: {0}")]
    Device(String),

    /// A blocking call waited past its deadline.
    #[error("timed out after {waited_ms} ms waiting for {what}")]
    Timeout {
        /// What the call waited for.
        what: String,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },

    /// A peer (keeper or worker) could not be reached or was lost.
    #[error("peer rank {rank} at {address} is lost: {reason}")]
    PeerLost {
        /// The lost peer's rank.
        rank: usize,
        /// Its address.
        address: String,
        /// Why it is considered lost.
        reason: String,
    },

    /// Two members of a cluster disagree on the protocol, the token or the tables.
    #[error("cluster mismatch: {0}")]
    Mismatch(String),

    /// The instance has shut down or failed; no more calls can succeed.
    #[error("instance is shut down: {0}")]
    ShutDown(String),

    /// A checkpoint cannot be written, or the one found cannot be used.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The folder or file concerned.
        path: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// An operating-system I/O failure.
    #[error("I/O error: {0}")]
    Io(String),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}

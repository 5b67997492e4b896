//! The status codes of the C ABI and the one failure type of this crate,
//! [`Failure`]: a code plus the message `geeps_last_error_message` returns.
//! It maps engine errors to codes one to one; it must never decide whether
//! something is an error (that is the engine's or the caller's marshalling).

use std::ffi::c_char;

use geeps_core::Error;

/// What a call did. `GEEPS_STATUS_OK` is 0; every other value is a failure
/// whose message `geeps_last_error_message()` returns on the same thread.
/// A failed call changes nothing, unless its documentation says otherwise.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeepsStatus {
    /// Success.
    Ok = 0,
    /// A pointer argument that must not be NULL was NULL.
    NullPointer = 1,
    /// An argument is unusable: an object that was freed or never created,
    /// a string that is not UTF-8, a size that overflows.
    InvalidArgument = 2,
    /// A configuration value geeps cannot use (the message names the field).
    InvalidConfig = 3,
    /// A table that this instance does not declare.
    UnknownTable = 4,
    /// A row outside its table.
    UnknownRow = 5,
    /// The rows of one access are not usable together (empty, repeated,
    /// or in a table of the wrong kind).
    InvalidKeys = 6,
    /// A handle or buffer that is not valid here: unknown, of another
    /// instance, of the wrong kind, not held, or already held.
    InvalidHandle = 7,
    /// A call made in the wrong phase of the instance's life (a real call
    /// before `geeps_finish_virtual_iteration`, a virtual call after it).
    InvalidState = 8,
    /// The device memory budget cannot hold the recorded iteration; the
    /// message names the bytes needed.
    BudgetTooSmall = 9,
    /// A device allocation failed.
    DeviceOutOfMemory = 10,
    /// The device backend failed.
    Device = 11,
    /// A blocking call waited past the configured deadline; the message
    /// says what it waited for and which worker is behind.
    Timeout = 12,
    /// A peer was lost or could not be reached.
    PeerLost = 13,
    /// Workers of one cluster disagree (row width, tables, protocol).
    Mismatch = 14,
    /// The instance is shut down (or failed): no call on it can succeed.
    ShutDown = 15,
    /// An operating-system I/O failure.
    Io = 16,
    /// geeps panicked; the instance may be unusable. Please report it.
    Panic = 17,
    /// An engine failure newer than this status list; the message says
    /// what went wrong.
    Other = 18,
    /// A checkpoint could not be written, or none usable was found to
    /// restore (the message names the folder or file and why).
    Checkpoint = 19,
}

impl GeepsStatus {
    fn name(self) -> &'static str {
        match self {
            GeepsStatus::Ok => "GEEPS_STATUS_OK\0",
            GeepsStatus::NullPointer => "GEEPS_STATUS_NULL_POINTER\0",
            GeepsStatus::InvalidArgument => "GEEPS_STATUS_INVALID_ARGUMENT\0",
            GeepsStatus::InvalidConfig => "GEEPS_STATUS_INVALID_CONFIG\0",
            GeepsStatus::UnknownTable => "GEEPS_STATUS_UNKNOWN_TABLE\0",
            GeepsStatus::UnknownRow => "GEEPS_STATUS_UNKNOWN_ROW\0",
            GeepsStatus::InvalidKeys => "GEEPS_STATUS_INVALID_KEYS\0",
            GeepsStatus::InvalidHandle => "GEEPS_STATUS_INVALID_HANDLE\0",
            GeepsStatus::InvalidState => "GEEPS_STATUS_INVALID_STATE\0",
            GeepsStatus::BudgetTooSmall => "GEEPS_STATUS_BUDGET_TOO_SMALL\0",
            GeepsStatus::DeviceOutOfMemory => "GEEPS_STATUS_DEVICE_OUT_OF_MEMORY\0",
            GeepsStatus::Device => "GEEPS_STATUS_DEVICE\0",
            GeepsStatus::Timeout => "GEEPS_STATUS_TIMEOUT\0",
            GeepsStatus::PeerLost => "GEEPS_STATUS_PEER_LOST\0",
            GeepsStatus::Mismatch => "GEEPS_STATUS_MISMATCH\0",
            GeepsStatus::ShutDown => "GEEPS_STATUS_SHUT_DOWN\0",
            GeepsStatus::Io => "GEEPS_STATUS_IO\0",
            GeepsStatus::Panic => "GEEPS_STATUS_PANIC\0",
            GeepsStatus::Other => "GEEPS_STATUS_OTHER\0",
            GeepsStatus::Checkpoint => "GEEPS_STATUS_CHECKPOINT\0",
        }
    }

    const ALL: [GeepsStatus; 20] = [
        GeepsStatus::Ok,
        GeepsStatus::NullPointer,
        GeepsStatus::InvalidArgument,
        GeepsStatus::InvalidConfig,
        GeepsStatus::UnknownTable,
        GeepsStatus::UnknownRow,
        GeepsStatus::InvalidKeys,
        GeepsStatus::InvalidHandle,
        GeepsStatus::InvalidState,
        GeepsStatus::BudgetTooSmall,
        GeepsStatus::DeviceOutOfMemory,
        GeepsStatus::Device,
        GeepsStatus::Timeout,
        GeepsStatus::PeerLost,
        GeepsStatus::Mismatch,
        GeepsStatus::ShutDown,
        GeepsStatus::Io,
        GeepsStatus::Panic,
        GeepsStatus::Other,
        GeepsStatus::Checkpoint,
    ];
}

/// The name of a status code (`"GEEPS_STATUS_TIMEOUT"`), as a static
/// NUL-terminated string; `"GEEPS_STATUS_UNKNOWN"` for a value that is not
/// one. It does not return a status.
#[no_mangle]
pub extern "C" fn geeps_status_name(status: i32) -> *const c_char {
    // The value comes from C as a plain integer: look it up, never transmute.
    let name = GeepsStatus::ALL.iter().find(|s| **s as i32 == status).map_or("GEEPS_STATUS_UNKNOWN\0", |s| s.name());
    name.as_ptr().cast()
}

/// A failed call: its status and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: GeepsStatus,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: GeepsStatus, message: impl Into<String>) -> Self {
        Failure { status, message: message.into() }
    }

    pub(crate) fn null(what: &str) -> Self {
        Failure::new(GeepsStatus::NullPointer, format!("`{what}` is NULL"))
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(GeepsStatus::InvalidArgument, message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::InvalidConfig { .. } => GeepsStatus::InvalidConfig,
            Error::UnknownTable { .. } => GeepsStatus::UnknownTable,
            Error::UnknownRow { .. } => GeepsStatus::UnknownRow,
            Error::InvalidKeys(_) => GeepsStatus::InvalidKeys,
            Error::InvalidHandle(_) => GeepsStatus::InvalidHandle,
            // C callers branch on the code, so a call after shutdown gets
            // the shutdown code rather than the generic state one.
            Error::InvalidState { state: "shut down", .. } => GeepsStatus::ShutDown,
            Error::InvalidState { .. } => GeepsStatus::InvalidState,
            Error::BudgetTooSmall { .. } => GeepsStatus::BudgetTooSmall,
            Error::DeviceOutOfMemory { .. } => GeepsStatus::DeviceOutOfMemory,
            Error::Device(_) => GeepsStatus::Device,
            Error::Timeout { .. } => GeepsStatus::Timeout,
            Error::PeerLost { .. } => GeepsStatus::PeerLost,
            Error::Mismatch(_) => GeepsStatus::Mismatch,
            Error::ShutDown(_) => GeepsStatus::ShutDown,
            Error::Io(_) => GeepsStatus::Io,
            Error::Checkpoint { .. } => GeepsStatus::Checkpoint,
            // `Error` is non-exhaustive: a kind of failure this version of
            // the C ABI does not name yet.
            _ => GeepsStatus::Other,
        };
        Failure::new(status, e.to_string())
    }
}

/// The result of the body of an exported function.
pub(crate) type FfiResult<T = ()> = Result<T, Failure>;

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    #[test]
    fn every_status_has_its_own_name() {
        let mut names = std::collections::HashSet::new();
        for (i, s) in GeepsStatus::ALL.iter().enumerate() {
            assert_eq!(*s as i32, i as i32, "codes are dense and in order");
            // SAFETY: geeps_status_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(geeps_status_name(*s as i32)) }.to_str().unwrap();
            assert!(names.insert(name), "{name} twice");
        }
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(geeps_status_name(99)) };
        assert_eq!(unknown.to_str().unwrap(), "GEEPS_STATUS_UNKNOWN");
    }

    #[test]
    fn shutdown_state_gets_the_shutdown_code() {
        let e = Error::InvalidState { call: "read", state: "shut down", hint: "create a new instance" };
        assert_eq!(Failure::from(e).status, GeepsStatus::ShutDown);
        let e = Error::InvalidState { call: "read", state: "running", hint: "" };
        assert_eq!(Failure::from(e).status, GeepsStatus::InvalidState);
    }
}

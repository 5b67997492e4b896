//! The boundary guard every exported function runs its body in: it catches
//! panics, turns a [`Failure`] into its status code and keeps its message in
//! a thread-local string for `geeps_last_error_message`. It must never let a
//! panic unwind into C, and never touch the message of another thread.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::status::{Failure, FfiResult, GeepsStatus};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn remember(failure: &Failure) {
    // An interior NUL would truncate the C string; engine messages quote
    // user-supplied table names, so replace rather than fail.
    let text = failure.message.replace('\0', "\u{FFFD}");
    let message = CString::new(text).unwrap_or_default();
    // `try_with` fails only while the thread is being torn down: then there
    // is no one left to read the message.
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = message);
}

/// Runs the body of an exported function.
pub(crate) fn guard(body: impl FnOnce() -> FfiResult) -> GeepsStatus {
    // Unwind safety: a panic leaves only engine state behind, whose locks do
    // not poison; the caller is told with GEEPS_STATUS_PANIC.
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Err(Failure::new(GeepsStatus::Panic, format!("geeps panicked: {what}")))
    });
    match outcome {
        Ok(()) => GeepsStatus::Ok,
        Err(failure) => {
            remember(&failure);
            failure.status
        }
    }
}

/// The message of the last failed call on this thread, as a NUL-terminated
/// string owned by the library: valid until the next failed call on this
/// thread; `""` if no call has failed here. Successful calls leave it as it
/// is. It does not return a status.
#[no_mangle]
pub extern "C" fn geeps_last_error_message() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    LAST_ERROR.try_with(|m| m.borrow().as_ptr()).unwrap_or(EMPTY.as_ptr().cast())
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    fn last() -> String {
        // SAFETY: the pointer is this thread's message, valid until the next
        // failure here; it is copied before any other call.
        unsafe { CStr::from_ptr(geeps_last_error_message()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn failures_set_the_thread_message_and_successes_keep_it() {
        let status = guard(|| Err(Failure::invalid("bad \0 thing")));
        assert_eq!(status, GeepsStatus::InvalidArgument);
        assert_eq!(last(), "bad \u{FFFD} thing");
        assert_eq!(guard(|| Ok(())), GeepsStatus::Ok);
        assert_eq!(last(), "bad \u{FFFD} thing");
        let other = std::thread::spawn(last).join().unwrap();
        assert_eq!(other, "", "messages are per thread");
    }

    #[test]
    fn panics_become_a_status() {
        let status = guard(|| panic!("boom {}", 7));
        assert_eq!(status, GeepsStatus::Panic);
        assert_eq!(last(), "geeps panicked: boom 7");
    }
}

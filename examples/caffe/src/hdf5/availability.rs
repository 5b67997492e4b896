//! Whether the HDF5 library can be loaded, for the features and tests that
//! need it: a test without it says `NOT RUN` and why on stderr, and fails
//! instead where `GEEPS_REQUIRE_HDF5=1` (as CI sets after installing it).
//! It must never load anything but through `sys`.

use super::sys::api;

/// Ok when the library loads; the reason, with how to install it, when not.
pub fn available() -> Result<(), String> {
    api().map(|_| ())
}

/// For a test named `test`: true when the library loads. Otherwise prints
/// `TEST: NOT RUN: REASON` and returns false, or panics when
/// `GEEPS_REQUIRE_HDF5=1`.
pub fn available_for(test: &str) -> bool {
    match available() {
        Ok(()) => true,
        Err(why) if std::env::var("GEEPS_REQUIRE_HDF5").is_ok_and(|v| v.trim() == "1") => {
            panic!("{test}: GEEPS_REQUIRE_HDF5=1 but {why}")
        }
        Err(why) => {
            eprintln!("{test}: NOT RUN: {why} (GEEPS_REQUIRE_HDF5=1 makes this a failure)");
            false
        }
    }
}

//! `geeps_version`: the library's version string. It never fails and
//! returns no status.

/// The library's version, `MAJOR.MINOR.PATCH`, as a static NUL-terminated
/// string. It does not return a status.
#[no_mangle]
pub extern "C" fn geeps_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

//! The Python exceptions of geeps and the boundary every call runs in: each
//! `geeps::Error` becomes the subclass of `GeepsError` that names its kind,
//! with geeps' message; a panic becomes `GeepsPanic` (a `GeepsError`) with
//! its message. Nothing here may let a Rust panic reach Python: PyO3 would
//! turn it into a `PanicException`, which is no `Exception` at all.

use std::panic::{catch_unwind, AssertUnwindSafe};

use geeps_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_geeps, GeepsError, PyException, "Every error geeps raises.");
create_exception!(_geeps, ConfigError, GeepsError, "A configuration value or table declaration geeps cannot use.");
create_exception!(
    _geeps,
    UnknownKeyError,
    GeepsError,
    "A table or row that does not exist, or keys not usable together."
);
create_exception!(_geeps, StateError, GeepsError, "A call, handle or buffer used where it is not allowed.");
create_exception!(_geeps, BufferReleasedError, StateError, "A buffer used after it was released.");
create_exception!(_geeps, ArgumentError, GeepsError, "An argument of the wrong type, dtype or shape.");
create_exception!(_geeps, MemoryBudgetError, GeepsError, "The device memory budget cannot hold what is asked.");
create_exception!(_geeps, DeviceError, GeepsError, "The device failed or is missing.");
create_exception!(_geeps, TimeoutError, GeepsError, "A blocking wait passed its deadline.");
create_exception!(_geeps, PeerError, GeepsError, "A peer of the cluster is lost, or the cluster does not match.");
create_exception!(_geeps, ShutDownError, GeepsError, "The instance is shut down.");
create_exception!(_geeps, CheckpointError, GeepsError, "A checkpoint could not be written or read.");
create_exception!(_geeps, GeepsIoError, GeepsError, "An I/O error inside geeps.");
create_exception!(_geeps, GeepsPanic, GeepsError, "An internal error of geeps (a bug: please report it).");

/// The Python exception for a geeps error, carrying its message.
pub fn to_py(e: Error) -> PyErr {
    let text = e.to_string();
    match e {
        Error::InvalidConfig { .. } => ConfigError::new_err(text),
        Error::UnknownTable { .. } | Error::UnknownRow { .. } | Error::InvalidKeys(_) => UnknownKeyError::new_err(text),
        Error::InvalidHandle(_) | Error::InvalidState { .. } => StateError::new_err(text),
        Error::BudgetTooSmall { .. } | Error::DeviceOutOfMemory { .. } => MemoryBudgetError::new_err(text),
        Error::Device(_) => DeviceError::new_err(text),
        Error::Timeout { .. } => TimeoutError::new_err(text),
        Error::PeerLost { .. } | Error::Mismatch(_) => PeerError::new_err(text),
        Error::ShutDown(_) => ShutDownError::new_err(text),
        Error::Checkpoint { .. } => CheckpointError::new_err(text),
        Error::Io(_) => GeepsIoError::new_err(text),
        _ => GeepsError::new_err(text),
    }
}

/// Runs a call's body, turning a panic into `GeepsPanic`.
pub fn guard<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    // Unwind safety: engine locks do not poison, and the caller is told.
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Err(GeepsPanic::new_err(format!("geeps panicked: {what}")))
    })
}

/// Runs a blocking geeps call with the GIL released, inside the guard.
pub fn blocking<T: Send>(py: Python<'_>, body: impl FnOnce() -> geeps_core::Result<T> + Send) -> PyResult<T> {
    py.allow_threads(|| guard(|| body().map_err(to_py)))
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GeepsError", py.get_type::<GeepsError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("UnknownKeyError", py.get_type::<UnknownKeyError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("BufferReleasedError", py.get_type::<BufferReleasedError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("MemoryBudgetError", py.get_type::<MemoryBudgetError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("TimeoutError", py.get_type::<TimeoutError>())?;
    m.add("PeerError", py.get_type::<PeerError>())?;
    m.add("ShutDownError", py.get_type::<ShutDownError>())?;
    m.add("CheckpointError", py.get_type::<CheckpointError>())?;
    m.add("GeepsIoError", py.get_type::<GeepsIoError>())?;
    m.add("GeepsPanic", py.get_type::<GeepsPanic>())?;
    Ok(())
}

/// Panics inside the guard: the test that proves no panic reaches Python.
#[pyfunction]
#[pyo3(name = "_panic_for_test")]
pub fn panic_for_test(py: Python<'_>, message: String) -> PyResult<()> {
    blocking(py, move || -> geeps_core::Result<()> { panic!("{message}") })
}

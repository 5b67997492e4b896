//! `geeps._geeps`, the extension module of the `geeps` Python package: the
//! classes (Builder, Table, Cluster, LocalCluster, Instance, VirtualIteration,
//! Handle, Buffer), the exceptions, logging and the CUDA probe. Each file
//! beside this one owns one class or concern; the package's Python code
//! (`python/geeps/`) builds the friendly API on top.

mod array;
mod buffer;
mod builder;
mod cluster;
mod dlpack;
mod errors;
mod instance;
mod recording;
mod table;

use std::io::IsTerminal;

use pyo3::prelude::*;

use crate::errors::{guard, ConfigError, DeviceError, StateError};

/// Sends geeps' log to stderr, filtered like `RUST_LOG` (`"warn"`, `"info"`);
/// None reads `GEEPS_LOG` (default `"warn"`). Once per process.
#[pyfunction]
#[pyo3(signature = (filter=None))]
fn init_logging(filter: Option<String>) -> PyResult<()> {
    guard(|| {
        let filter = filter.unwrap_or_else(|| std::env::var("GEEPS_LOG").unwrap_or_else(|_| "warn".into()));
        let env = tracing_subscriber::EnvFilter::try_new(&filter)
            .map_err(|e| ConfigError::new_err(format!("log filter `{filter}`: {e}")))?;
        // Colour only for a person at a terminal, and never under NO_COLOR.
        let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        tracing_subscriber::fmt()
            .with_env_filter(env)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .try_init()
            .map_err(|e| StateError::new_err(format!("a logger is already installed in this process: {e}")))
    })
}

/// Whether CUDA GPU `ordinal` is usable by geeps: a description, or
/// `DeviceError` saying what is missing.
#[pyfunction]
#[pyo3(signature = (ordinal=0))]
fn cuda_probe(ordinal: usize) -> PyResult<String> {
    guard(|| {
        geeps_cuda::CudaDevice::probe(ordinal).map(|p| p.to_string()).map_err(|e| DeviceError::new_err(e.to_string()))
    })
}

#[pymodule]
fn _geeps(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DEFAULT_ROW_WIDTH", geeps_core::DEFAULT_ROW_WIDTH)?;
    m.add_class::<builder::Builder>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<cluster::Cluster>()?;
    m.add_class::<cluster::LocalCluster>()?;
    m.add_class::<instance::Instance>()?;
    m.add_class::<recording::VirtualIteration>()?;
    m.add_class::<recording::Handle>()?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<array::ArrayExport>()?;
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_probe, m)?)?;
    m.add_function(wrap_pyfunction!(errors::panic_for_test, m)?)?;
    Ok(())
}

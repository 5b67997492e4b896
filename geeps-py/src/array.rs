//! The numpy view of a held host buffer: a small object whose
//! `__array_interface__` describes the rows (float32, rows × row width,
//! read-only for a read buffer) and which numpy keeps as the array's base.
//! It counts as a live view of the buffer until numpy drops it. It never
//! copies rows and never releases the buffer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use geeps_core::Geeps;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The base object of a numpy view of a geeps buffer.
#[pyclass(module = "geeps._geeps", frozen)]
pub struct ArrayExport {
    ptr: u64,
    rows: usize,
    width: usize,
    read_only: bool,
    live: Arc<AtomicUsize>,
    // Keep the buffer held (it is released on drop) and its memory mapped
    // as long as a view of it exists.
    _owner: Py<PyAny>,
    _instance: Arc<Geeps>,
}

impl ArrayExport {
    pub fn new(
        ptr: u64,
        rows: usize,
        width: usize,
        read_only: bool,
        live: &Arc<AtomicUsize>,
        instance: &Arc<Geeps>,
        owner: Py<PyAny>,
    ) -> ArrayExport {
        live.fetch_add(1, Ordering::AcqRel);
        ArrayExport { ptr, rows, width, read_only, live: live.clone(), _owner: owner, _instance: instance.clone() }
    }
}

impl Drop for ArrayExport {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::AcqRel);
    }
}

#[pymethods]
impl ArrayExport {
    /// numpy's array interface (version 3) of the rows.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", (self.rows, self.width))?;
        d.set_item("typestr", "<f4")?;
        d.set_item("data", (self.ptr, self.read_only))?;
        d.set_item("strides", py.None())?;
        Ok(d)
    }
}

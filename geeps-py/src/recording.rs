//! The virtual iteration from Python: `Handle` names a recorded call, and
//! `VirtualIteration` is the context manager that records one pass (each
//! call returns a handle; nothing runs) and, when its block ends without an
//! exception, finishes it (plan, indexes, threads). It executes nothing
//! itself: recording and planning are geeps-core's.

use std::sync::Arc;

use geeps_core::{Geeps, Handle as CoreHandle};
use pyo3::prelude::*;

use crate::errors::{blocking, guard, to_py, ArgumentError};
use crate::table::{keys, table_id};

/// A recorded call: pass it to the real call of the same kind.
#[pyclass(module = "geeps._geeps", name = "Handle", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    pub inner: CoreHandle,
}

#[pymethods]
impl Handle {
    /// The position of the call in the recorded sequence.
    #[getter]
    fn position(&self) -> usize {
        self.inner.position()
    }

    fn __repr__(&self) -> String {
        format!("Handle(position={})", self.inner.position())
    }
}

fn handle(h: geeps_core::Result<CoreHandle>) -> PyResult<Handle> {
    h.map(|inner| Handle { inner }).map_err(to_py)
}

/// Records one iteration: every call returns a `Handle` and runs nothing.
/// As a context manager, a block that ends without an exception finishes
/// the virtual iteration.
#[pyclass(module = "geeps._geeps", frozen)]
pub struct VirtualIteration {
    pub ps: Arc<Geeps>,
}

#[pymethods]
impl VirtualIteration {
    /// Records a `read` of `rows` of `table`, fresh within `slack` clocks
    /// (0: BSP; None: never waits).
    #[pyo3(signature = (table, rows, slack=Some(0)))]
    fn read(&self, table: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>, slack: Option<i64>) -> PyResult<Handle> {
        let (k, s) = (keys(table, rows)?, crate::table::slack(slack)?);
        guard(|| handle(self.ps.virtual_read(&k, s)))
    }

    /// Records the `post_read` of the read `read`.
    fn post_read(&self, read: &Handle) -> PyResult<Handle> {
        guard(|| handle(self.ps.virtual_post_read(read.inner)))
    }

    /// Records a `pre_update` of `rows` of `table`; `overwrite=True`: the
    /// application overwrites the whole buffer, which then comes unzeroed.
    #[pyo3(signature = (table, rows, overwrite=false))]
    fn pre_update(&self, table: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>, overwrite: bool) -> PyResult<Handle> {
        let k = keys(table, rows)?;
        guard(|| {
            handle(if overwrite { self.ps.virtual_pre_update_overwrite(&k) } else { self.ps.virtual_pre_update(&k) })
        })
    }

    /// Records the `update` of the pre-update `pre_update`.
    fn update(&self, pre_update: &Handle) -> PyResult<Handle> {
        guard(|| handle(self.ps.virtual_update(pre_update.inner)))
    }

    /// Records a `local_access` of `rows` of local `table`; `fetch=False`
    /// skips loading them (the application overwrites them).
    #[pyo3(signature = (table, rows, fetch=true))]
    fn local_access(&self, table: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>, fetch: bool) -> PyResult<Handle> {
        let k = keys(table, rows)?;
        guard(|| handle(self.ps.virtual_local_access(&k, fetch)))
    }

    /// Records the `post_local_access` of `access`; `save=False` skips storing.
    #[pyo3(signature = (access, save=true))]
    fn post_local_access(&self, access: &Handle, save: bool) -> PyResult<Handle> {
        guard(|| handle(self.ps.virtual_post_local_access(access.inner, save)))
    }

    /// Records a `post_local_access` of `access` declaring its rows dead.
    fn discard_local_access(&self, access: &Handle) -> PyResult<Handle> {
        guard(|| handle(self.ps.virtual_discard_local_access(access.inner)))
    }

    /// Records a `table_clock` of `table`.
    fn table_clock(&self, table: &Bound<'_, PyAny>) -> PyResult<Handle> {
        let t = table_id(table)?;
        guard(|| handle(self.ps.virtual_table_clock(t)))
    }

    /// Records a `table_clock` of every parameter table.
    fn clock(&self) -> PyResult<()> {
        guard(|| self.ps.virtual_clock().map_err(to_py))
    }

    /// Ends the virtual iteration: plans placement, builds the indexes and
    /// starts the background threads.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        let ps = self.ps.clone();
        blocking(py, move || ps.finish_virtual_iteration())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            self.finish(py)?;
        }
        Ok(false)
    }
}

/// Checks a handle was recorded for the call it is passed to.
pub fn expect_handle(h: &Bound<'_, PyAny>, call: &str) -> PyResult<CoreHandle> {
    h.downcast::<Handle>()
        .map(|h| h.get().inner)
        .map_err(|_| ArgumentError::new_err(format!("{call} takes a geeps.Handle from the virtual iteration, not {h}")))
}

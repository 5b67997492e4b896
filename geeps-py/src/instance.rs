//! `Geeps`, one worker's instance as Python holds it: the real calls by
//! handle and by keys (each blocking one with the GIL released), clocks,
//! stats and plan, checkpoint and restore, shutdown. Buffers it hands out
//! are `Buffer`s; it never touches their rows.

use std::sync::Arc;
use std::time::Duration;

use geeps_core::{Geeps, RawBuffer};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::buffer::{Buffer, Kind};
use crate::cluster::Cluster;
use crate::dlpack::Place;
use crate::errors::{blocking, guard, to_py, ArgumentError, UnknownKeyError};
use crate::recording::{expect_handle, VirtualIteration};
use crate::table::{keys, table_id, Table};

/// One worker of a data-parallel job: its tables, calls and clocks.
#[pyclass(module = "geeps._geeps", name = "Geeps", frozen)]
pub struct Instance {
    pub ps: Arc<Geeps>,
    pub place: Place,
    pub tables: Vec<Table>,
    /// Keeps the network cluster alive while the instance is.
    pub cluster: Option<Py<Cluster>>,
}

impl Instance {
    fn buffer(&self, kind: Kind, raw: RawBuffer) -> Buffer {
        Buffer::new(self.ps.clone(), raw, kind, self.place)
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &geeps_core::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("wall_s", s.wall.as_secs_f64())?;
    d.set_item("blocked_s", s.blocked.as_secs_f64())?;
    d.set_item("stall_fraction", s.stall_fraction)?;
    d.set_item("bytes_host_to_device", s.bytes_host_to_device)?;
    d.set_item("bytes_device_to_host", s.bytes_device_to_host)?;
    d.set_item("slow_path_calls", s.slow_path_calls)?;
    d.set_item("prefetch_hits", s.prefetch_hits)?;
    d.set_item("resyncs", s.resyncs)?;
    d.set_item("handovers", s.handovers)?;
    d.set_item("reads_in_place", s.reads_in_place)?;
    let calls = PyDict::new(py);
    for (kind, c) in &s.calls {
        calls.set_item(kind.name(), (c.count, c.blocked.as_secs_f64()))?;
    }
    d.set_item("calls", calls)?;
    d.set_item("text", s.to_string())?;
    Ok(d)
}

#[pymethods]
impl Instance {
    /// This worker's rank.
    #[getter]
    fn rank(&self) -> usize {
        self.ps.rank()
    }

    /// The number of workers.
    #[getter]
    fn num_workers(&self) -> usize {
        self.ps.num_workers()
    }

    /// Floats per row.
    #[getter]
    fn row_width(&self) -> usize {
        self.ps.row_width()
    }

    /// The declared tables, by id.
    #[getter]
    fn tables(&self) -> Vec<Table> {
        self.tables.clone()
    }

    /// The DLPack device of its buffers: `(1, 0)` host, `(2, N)` CUDA GPU N.
    #[getter]
    fn dlpack_device(&self) -> (i32, i32) {
        (self.place.device_type, self.place.device_id)
    }

    /// The table declared as `name`.
    fn table(&self, name: &str) -> PyResult<Table> {
        self.tables.iter().find(|t| t.name == name).cloned().ok_or_else(|| {
            let names: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
            UnknownKeyError::new_err(format!("no table named {name:?} (this instance declares {names:?})"))
        })
    }

    /// The recorder of the virtual iteration (a context manager that
    /// finishes it when its block ends without an exception).
    fn virtual_iteration(&self) -> VirtualIteration {
        VirtualIteration { ps: self.ps.clone() }
    }

    /// Ends the virtual iteration (also with nothing recorded).
    fn finish_virtual_iteration(&self, py: Python<'_>) -> PyResult<()> {
        let ps = self.ps.clone();
        blocking(py, move || ps.finish_virtual_iteration())
    }

    /// `read` by recorded handle: a read buffer fresh within the recorded slack.
    fn read(&self, py: Python<'_>, handle: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let h = expect_handle(handle, "read")?;
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.read(h).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Read, raw))
    }

    /// `read` of keys that were not recorded (slow path).
    #[pyo3(signature = (table, rows, slack=Some(0)))]
    fn read_keys(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        rows: &Bound<'_, PyAny>,
        slack: Option<i64>,
    ) -> PyResult<Buffer> {
        let (k, s) = (keys(table, rows)?, crate::table::slack(slack)?);
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.read_keys(&k, s).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Read, raw))
    }

    /// `pre_update` by recorded handle: a zeroed buffer for deltas.
    fn pre_update(&self, py: Python<'_>, handle: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let h = expect_handle(handle, "pre_update")?;
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.pre_update(h).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Update, raw))
    }

    /// `pre_update` of keys that were not recorded (slow path).
    fn pre_update_keys(&self, py: Python<'_>, table: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let k = keys(table, rows)?;
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.pre_update_keys(&k).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Update, raw))
    }

    /// `local_access` by recorded handle.
    fn local_access(&self, py: Python<'_>, handle: &Bound<'_, PyAny>) -> PyResult<Buffer> {
        let h = expect_handle(handle, "local_access")?;
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.local_access(h).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Local, raw))
    }

    /// `local_access` of keys that were not recorded (slow path).
    #[pyo3(signature = (table, rows, fetch=true))]
    fn local_access_keys(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyAny>,
        rows: &Bound<'_, PyAny>,
        fetch: bool,
    ) -> PyResult<Buffer> {
        let k = keys(table, rows)?;
        let ps = self.ps.clone();
        let raw = blocking(py, move || ps.local_access_keys(&k, fetch).map(|b| b.into_raw()))?;
        Ok(self.buffer(Kind::Local, raw))
    }

    /// `post_read` of a read buffer (same as `buffer.post()`).
    fn post_read(&self, py: Python<'_>, buffer: &Bound<'_, Buffer>) -> PyResult<()> {
        expect_kind(buffer, Kind::Read, "post_read")?;
        buffer.get().release_default(py)
    }

    /// `update` of a pre-update buffer (same as `buffer.update()`).
    fn update(&self, py: Python<'_>, buffer: &Bound<'_, Buffer>) -> PyResult<()> {
        expect_kind(buffer, Kind::Update, "update")?;
        buffer.get().release_default(py)
    }

    /// `post_local_access` of a local buffer (same as `buffer.post(save)`).
    #[pyo3(signature = (buffer, save=None))]
    fn post_local_access(&self, buffer: &Bound<'_, Buffer>, save: Option<bool>) -> PyResult<()> {
        expect_kind(buffer, Kind::Local, "post_local_access")?;
        buffer.call_method1("post", (save,)).map(|_| ())
    }

    /// Ends this worker's clock on `table`: its updates go to the keepers.
    fn table_clock(&self, py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = table_id(table)?;
        let ps = self.ps.clone();
        blocking(py, move || ps.table_clock(t))
    }

    /// Ends this worker's clock on every parameter table.
    fn clock(&self, py: Python<'_>) -> PyResult<()> {
        let ps = self.ps.clone();
        blocking(py, move || ps.clock())
    }

    /// Clocks this worker has ended on `table`.
    fn current_table_clock(&self, table: &Bound<'_, PyAny>) -> PyResult<u64> {
        let t = table_id(table)?;
        guard(|| self.ps.current_table_clock(t).map_err(to_py))
    }

    /// The counters: wall and blocked time, stall fraction, bytes moved,
    /// slow-path calls, prefetch hits, per-call counts (`calls`), and `text`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = guard(|| Ok(self.ps.stats()))?;
        stats_dict(py, &s)
    }

    /// Starts the counters over.
    fn reset_stats(&self) -> PyResult<()> {
        guard(|| {
            self.ps.reset_stats();
            Ok(())
        })
    }

    /// The placement plan (after the virtual iteration) as a dict.
    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = guard(|| self.ps.plan().map_err(to_py))?;
        let d = PyDict::new(py);
        d.set_item("budget", p.budget)?;
        d.set_item("peak_bytes", p.peak_bytes)?;
        d.set_item("pool_bytes", p.pool_bytes)?;
        d.set_item("double_buffered", p.double_buffered)?;
        d.set_item("local_device_bytes", p.local_device_bytes)?;
        d.set_item("local_host_bytes", p.local_host_bytes)?;
        d.set_item("local_in_place", p.local_in_place)?;
        d.set_item("local_buffered", p.local_buffered)?;
        d.set_item("handovers", p.handovers)?;
        let tables = p
            .tables
            .iter()
            .map(|t| (t.name.clone(), t.rows_on_device, t.rows_on_host))
            .collect::<Vec<(String, u32, u32)>>();
        d.set_item("tables", tables)?;
        Ok(d)
    }

    /// Sets how long a blocking wait may last before it fails, in seconds.
    fn set_wait_deadline(&self, seconds: f64) -> PyResult<()> {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(ArgumentError::new_err(format!("a deadline is a positive number of seconds, not {seconds}")));
        }
        guard(|| self.ps.set_wait_deadline(Duration::from_secs_f64(seconds)).map_err(to_py))
    }

    /// Saves every parameter table as of this clock into `dir` with this
    /// worker's `state` (bytes). Every worker calls it at the same point;
    /// returns the checkpoint's folder on rank 0, None elsewhere.
    #[pyo3(signature = (dir, state=None))]
    fn checkpoint(&self, py: Python<'_>, dir: std::path::PathBuf, state: Option<Vec<u8>>) -> PyResult<Option<String>> {
        let ps = self.ps.clone();
        let state = state.unwrap_or_default();
        let folder = blocking(py, move || ps.checkpoint(&dir, &state))?;
        Ok(folder.map(|f| f.display().to_string()))
    }

    /// Loads the newest checkpoint in `dir` into this fresh instance (after
    /// the virtual iteration, before any update): a dict with `folder`,
    /// `clock`, `workers` and `rank_states` (each saved worker's bytes).
    fn restore<'py>(&self, py: Python<'py>, dir: std::path::PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let ps = self.ps.clone();
        let r = blocking(py, move || ps.restore(&dir))?;
        let d = PyDict::new(py);
        d.set_item("folder", r.folder.display().to_string())?;
        d.set_item("clock", r.clock)?;
        d.set_item("workers", r.workers)?;
        let states: Vec<Bound<'py, PyBytes>> = r.rank_states.iter().map(|s| PyBytes::new(py, s)).collect();
        d.set_item("rank_states", states)?;
        Ok(d)
    }

    /// Stops the background threads and leaves the cluster. Idempotent.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let ps = self.ps.clone();
        blocking(py, move || ps.shutdown())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.shutdown(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Geeps(rank={}, workers={}, tables={})", self.ps.rank(), self.ps.num_workers(), self.tables.len())
    }
}

fn expect_kind(buffer: &Bound<'_, Buffer>, kind: Kind, call: &str) -> PyResult<()> {
    let b = buffer.get();
    if b.kind_of() != kind {
        return Err(crate::errors::StateError::new_err(format!(
            "{call} takes a {:?} buffer, not a {:?} one",
            kind,
            b.kind_of()
        )));
    }
    Ok(())
}

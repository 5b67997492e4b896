//! `Buffer`: a buffer the application holds (from read, pre_update or
//! local_access), its views without a copy (numpy through the array
//! interface, any DLPack consumer such as torch) and its release. A released buffer
//! refuses every use with `BufferReleasedError`; a release while a view is
//! alive is refused, so no view ever outlives the hold. It never copies
//! rows except in `copy_from`, at the caller's request. A buffer dropped
//! while held is released as a Rust guard would be.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use geeps_core::{Geeps, RawBuffer, ReleaseAs};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::array::ArrayExport;
use crate::dlpack::{capsule, Place, View, DEVICE_CPU};
use crate::errors::{blocking, ArgumentError, BufferReleasedError, StateError};

/// Which call handed the buffer out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Update,
    Local,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Update => "update",
            Kind::Local => "local",
        }
    }
}

/// Rows held by the application until released. Use it as a context
/// manager, or release it with `post` / `update` / `discard`.
#[pyclass(module = "geeps._geeps", frozen)]
pub struct Buffer {
    ps: Arc<Geeps>,
    raw: RawBuffer,
    kind: Kind,
    width: usize,
    place: Place,
    /// How it was released, once it was.
    released: Mutex<Option<&'static str>>,
    /// Live DLPack exports (numpy arrays, tensors) of it.
    views: Arc<AtomicUsize>,
}

impl Buffer {
    pub fn new(ps: Arc<Geeps>, raw: RawBuffer, kind: Kind, place: Place) -> Buffer {
        let width = ps.row_width();
        Buffer { ps, raw, kind, width, place, released: Mutex::new(None), views: Arc::new(AtomicUsize::new(0)) }
    }

    pub fn kind_of(&self) -> Kind {
        self.kind
    }

    fn rows_count(&self) -> usize {
        self.raw.floats / self.width
    }

    fn check_held(&self) -> PyResult<()> {
        match *self.released.lock() {
            None => Ok(()),
            Some(how) => Err(BufferReleasedError::new_err(format!(
                "this {} buffer was released ({how}); a buffer is valid only while held: take a new one",
                self.kind.name()
            ))),
        }
    }

    /// Releases the buffer `how`, unless it is released already or a view
    /// of it is alive.
    fn release(&self, py: Python<'_>, how: ReleaseAs, called: &'static str) -> PyResult<()> {
        let mut released = self.released.lock();
        if let Some(before) = *released {
            return Err(BufferReleasedError::new_err(format!(
                "{called}: this {} buffer was released already ({before})",
                self.kind.name()
            )));
        }
        let live = self.views.load(Ordering::Acquire);
        if live > 0 {
            return Err(StateError::new_err(format!(
                "{called}: {live} view(s) of this buffer (numpy arrays or tensors) are still alive; \
                 delete them (del) or copy what you need first: geeps reuses the memory once it is released"
            )));
        }
        // Marked before the call and the lock dropped: the call runs without
        // the GIL, and a thread waiting on this lock may hold the GIL.
        *released = Some(called);
        drop(released);
        let (ps, ticket) = (self.ps.clone(), self.raw.ticket);
        let outcome = blocking(py, move || ps.release_raw(ticket, how));
        if outcome.is_err() {
            // A buffer released the wrong way stays held and usable.
            *self.released.lock() = None;
        }
        outcome
    }

    fn wrong_kind(&self, called: &str, use_instead: &str) -> PyErr {
        StateError::new_err(format!("{called} does not apply to a {} buffer: use {use_instead}", self.kind.name()))
    }

    /// The default release: post_read, update, or post_local_access as recorded.
    pub fn release_default(&self, py: Python<'_>) -> PyResult<()> {
        match self.kind {
            Kind::Read => self.release(py, ReleaseAs::PostRead, "post_read"),
            Kind::Update => self.release(py, ReleaseAs::Update, "update"),
            Kind::Local => self.release(py, ReleaseAs::PostLocal { save: None }, "post_local_access"),
        }
    }

    /// A numpy view of the rows (rows × row width, float32); read-only for a read buffer.
    fn view<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.get();
        this.check_held()?;
        if this.place.device_type != DEVICE_CPU {
            return Err(StateError::new_err(
                "this buffer lives in GPU memory: use torch.from_dlpack(buffer) (or geeps.torch.tensor(buffer)), not numpy",
            ));
        }
        let export = ArrayExport::new(
            this.raw.ptr.0,
            this.rows_count(),
            this.width,
            this.kind == Kind::Read,
            &this.views,
            &this.ps,
            slf.clone().into_any().unbind(),
        );
        let np = slf.py().import("numpy")?;
        np.call_method1("asarray", (Bound::new(slf.py(), export)?,))
    }
}

/// A buffer dropped while held is released as a Rust guard is: post_read,
/// a discarded update, or post_local_access as recorded. No view is alive
/// then: every view holds the buffer.
impl Drop for Buffer {
    fn drop(&mut self) {
        if self.released.get_mut().is_none() {
            let how = match self.kind {
                Kind::Read => ReleaseAs::PostRead,
                Kind::Update => ReleaseAs::Discard,
                Kind::Local => ReleaseAs::PostLocal { save: None },
            };
            let (ps, ticket) = (&self.ps, self.raw.ticket);
            // A failure here has no one to report to (a shut-down instance, say).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ps.release_raw(ticket, how)));
        }
    }
}

#[pymethods]
impl Buffer {
    /// Rows in the buffer, in the order of the access's keys.
    #[getter]
    fn rows(&self) -> usize {
        self.rows_count()
    }

    /// Floats per row.
    #[getter]
    fn row_width(&self) -> usize {
        self.width
    }

    /// `(rows, row_width)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.rows_count(), self.width)
    }

    /// `"read"`, `"update"` or `"local"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether the buffer was released.
    #[getter]
    fn released(&self) -> bool {
        self.released.lock().is_some()
    }

    /// Views (numpy arrays, tensors) of the buffer still alive.
    #[getter]
    fn live_views(&self) -> usize {
        self.views.load(Ordering::Acquire)
    }

    /// For a read buffer, the clock its rows were read at: every worker's
    /// updates of the clocks below it are in them (with read-my-writes,
    /// this worker's own are all in). `None` for other buffers.
    #[getter]
    fn data_age(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.check_held()?;
        let (ps, ticket) = (self.ps.clone(), self.raw.ticket);
        blocking(py, move || ps.data_age(ticket))
    }

    /// The address of the rows in device memory (a GPU address on a CUDA device).
    #[getter]
    fn data_ptr(&self) -> PyResult<u64> {
        self.check_held()?;
        Ok(self.raw.ptr.0)
    }

    /// The rows as a numpy array of shape `(rows, row_width)`, float32,
    /// without a copy (read-only for a read buffer). Valid while the buffer
    /// is held: delete it before releasing the buffer.
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Buffer::view(slf)
    }

    /// Copies `source` (anything numpy converts, shape `(rows, row_width)`
    /// or `rows * row_width` floats, dtype float32) into the buffer.
    fn copy_from(slf: &Bound<'_, Self>, source: &Bound<'_, PyAny>) -> PyResult<()> {
        let this = slf.get();
        this.check_held()?;
        if this.kind == Kind::Read {
            return Err(
                this.wrong_kind("copy_from", "a pre_update or local_access buffer (read buffers are read-only)")
            );
        }
        let py = slf.py();
        let np = py.import("numpy")?;
        let src = np.call_method1("asarray", (source,))?;
        let dtype: String = src.getattr("dtype")?.str()?.extract()?;
        if dtype != "float32" {
            return Err(ArgumentError::new_err(format!(
                "copy_from needs float32 data, not {dtype} (convert it with .astype(numpy.float32))"
            )));
        }
        let shape: Vec<usize> = src.getattr("shape")?.extract()?;
        let (rows, width) = (this.rows_count(), this.width);
        if shape != [rows, width] && shape != [rows * width] {
            return Err(ArgumentError::new_err(format!(
                "copy_from needs shape ({rows}, {width}) or ({},), not {shape:?}",
                rows * width
            )));
        }
        let dst = Buffer::view(slf)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("casting", "no")?;
        np.call_method("copyto", (&dst, src.call_method1("reshape", ((rows, width),))?), Some(&kwargs))?;
        Ok(())
    }

    /// DLPack: a capsule viewing the rows without a copy (the protocol
    /// `torch.from_dlpack` and `numpy.from_dlpack` call). The rows are
    /// complete when the buffer is handed out, so `stream` needs no wait.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        let this = slf.get();
        this.check_held()?;
        if copy == Some(true) {
            return Err(pyo3::exceptions::PyBufferError::new_err("geeps buffers are exported without a copy"));
        }
        if let Some((t, id)) = dl_device {
            if (t, id) != (this.place.device_type, this.place.device_id) {
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "the buffer is on DLPack device ({}, {}), not ({t}, {id})",
                    this.place.device_type, this.place.device_id
                )));
            }
        }
        // DLPack 1.x when the consumer takes it (it carries the read-only
        // flag of a read buffer), else the legacy capsule.
        let versioned = match max_version {
            Some(v) if !v.is_none() => v.extract::<(u32, u32)>().map(|(major, _)| major >= 1).unwrap_or(false),
            _ => false,
        };
        let view = View {
            ptr: this.raw.ptr.0,
            rows: this.rows_count(),
            width: this.width,
            place: this.place,
            versioned,
            read_only: this.kind == Kind::Read,
        };
        capsule(slf.py(), view, &this.views, &this.ps, slf.clone().into_any().unbind())
    }

    /// DLPack: `(device_type, device_id)`, `(1, 0)` for host memory, `(2, N)` for CUDA GPU N.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (self.place.device_type, self.place.device_id)
    }

    /// `post_read` (read buffer) or `post_local_access` (local buffer; `save`
    /// `None` uses the recorded flag, true for keyed accesses).
    #[pyo3(signature = (save=None))]
    fn post(&self, py: Python<'_>, save: Option<bool>) -> PyResult<()> {
        match (self.kind, save) {
            (Kind::Read, None) => self.release(py, ReleaseAs::PostRead, "post_read"),
            (Kind::Read, Some(_)) => Err(ArgumentError::new_err("post_read takes no save flag")),
            (Kind::Local, save) => self.release(py, ReleaseAs::PostLocal { save }, "post_local_access"),
            (Kind::Update, _) => Err(self.wrong_kind("post", "update() or discard()")),
        }
    }

    /// `update`: adds the deltas to the parameters and returns the buffer.
    fn update(&self, py: Python<'_>) -> PyResult<()> {
        match self.kind {
            Kind::Update => self.release(py, ReleaseAs::Update, "update"),
            _ => Err(self.wrong_kind("update", "post()")),
        }
    }

    /// Returns an update buffer without applying it, or posts a local buffer
    /// declaring its rows dead (nothing saved).
    fn discard(&self, py: Python<'_>) -> PyResult<()> {
        match self.kind {
            Kind::Update => self.release(py, ReleaseAs::Discard, "discard"),
            Kind::Local => self.release(py, ReleaseAs::DiscardLocal, "discard"),
            Kind::Read => Err(self.wrong_kind("discard", "post()")),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the buffer unless it was: as recorded, and an update buffer
    /// is discarded when the block raised.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if self.released.lock().is_some() {
            return Ok(false);
        }
        match (exc_type.is_some(), self.kind) {
            (true, Kind::Update) => self.release(py, ReleaseAs::Discard, "discard")?,
            _ => self.release_default(py)?,
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.released.lock().is_some() { "released" } else { "held" };
        format!("Buffer(kind={}, rows={}, row_width={}, {state})", self.kind.name(), self.rows_count(), self.width)
    }
}

//! `geeps_instance`: one engine instance as C holds it. It owns the life of
//! the C object (tables declared, then joined to the cluster at the first
//! virtual call, then shut down) and the table of buffers held by C. Every
//! acquisition and release goes through here so the held table and the
//! engine never disagree. It must never serve an access itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use geeps_core::device::StreamId;
use geeps_core::{Device, Geeps, RawBuffer, ReleaseAs, Result as CoreResult, TableKind};
use geeps_cuda::{CudaConfig, CudaDevice};
use parking_lot::Mutex;

use crate::cluster::RankClaim;
use crate::config::Settings;
use crate::handles::{GeepsHandle, GEEPS_INVALID_HANDLE};
use crate::held::{Entry, Held, Key, Kind};
use crate::registry::Registry;
use crate::status::{Failure, FfiResult, GeepsStatus};

/// One geeps instance: one worker of a data-parallel job. Opaque; create
/// with `geeps_new`, free with `geeps_free`.
pub struct GeepsInstance {
    /// Set once, when the instance joins its cluster. Declared first so it
    /// drops first: the engine stops before its rank and its cluster (which
    /// `claim` and `declaring` hold) are released.
    geeps: OnceLock<Geeps>,
    /// The rank this instance joined as, until it shuts down.
    claim: Mutex<Option<RankClaim>>,
    /// The device the engine is built on; None: the engine's default, the
    /// host device. Kept here for the copy helpers, which go through it.
    device: Option<Arc<dyn Device>>,
    /// The stream of the copy helpers on `device`, made at the first copy
    /// that needs one; its lock orders the copies.
    copy_stream: Mutex<Option<StreamId>>,
    /// `geeps_shutdown` was called (before or after joining).
    stopped: AtomicBool,
    declaring: Mutex<Declaring>,
    held: Mutex<Held>,
    /// The acquisition handles its virtual calls returned, with their kind,
    /// so that a real call names the handle the caller passed when it is
    /// not one of them.
    recorded: Mutex<HashMap<GeepsHandle, Kind>>,
    /// What `geeps_restore` loaded, for `geeps_restored_state`.
    pub(crate) restored: Mutex<Option<geeps_core::Restored>>,
}

/// What the instance knows before it joins.
struct Declaring {
    settings: Settings,
    tables: Vec<(String, TableKind, u32)>,
    /// Shut down before it ever joined.
    shut_down: bool,
}

pub(crate) static INSTANCES: Registry<GeepsInstance> = Registry::new("geeps_instance");

/// Which way a copy helper copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    ToHost,
    FromHost,
}

impl GeepsInstance {
    /// An instance of `settings`, on the device they name: a CUDA device is
    /// opened here, so that `geeps_new` reports a missing driver or GPU (and
    /// never falls back to the host).
    pub(crate) fn new(settings: Settings) -> FfiResult<Self> {
        let device: Option<Arc<dyn Device>> = match settings.cuda {
            None => None,
            Some(ordinal) => {
                let config = CudaConfig::ordinal(ordinal).with_budget(settings.config.device_memory);
                let gpu = CudaDevice::new(config).map_err(|e| {
                    let e = match e {
                        geeps_core::Error::Device(text) => text,
                        other => other.to_string(),
                    };
                    Failure::new(
                        GeepsStatus::Device,
                        format!(
                            "geeps_new: cannot open CUDA device {ordinal} (set by geeps_config_set_cuda_device): {e}"
                        ),
                    )
                })?;
                Some(Arc::new(gpu))
            }
        };
        Ok(GeepsInstance {
            geeps: OnceLock::new(),
            claim: Mutex::new(None),
            device,
            copy_stream: Mutex::new(None),
            stopped: AtomicBool::new(false),
            declaring: Mutex::new(Declaring { settings, tables: Vec::new(), shut_down: false }),
            held: Mutex::new(Held::default()),
            recorded: Mutex::new(HashMap::new()),
            restored: Mutex::new(None),
        })
    }

    /// Whether buffers' `data` are host pointers: true on the host device.
    pub(crate) fn host_addressable(&self) -> bool {
        self.device.as_ref().is_none_or(|d| d.info().host_addressable)
    }

    /// The deadline of blocking calls made from now on.
    pub(crate) fn wait_deadline(&self) -> Duration {
        match self.geeps.get() {
            Some(g) => g.wait_deadline(),
            None => self.declaring.lock().settings.config.wait_deadline,
        }
    }

    /// Changes the deadline of blocking calls that start from now on; before
    /// the instance joins, of the engine it will build.
    pub(crate) fn set_wait_deadline(&self, deadline: Duration) -> FfiResult {
        let mut d = self.declaring.lock();
        if self.stopped.load(Ordering::Acquire) {
            return Err(Failure::new(GeepsStatus::ShutDown, "geeps_set_wait_deadline_ms: the instance is shut down"));
        }
        match self.geeps.get() {
            Some(g) => Ok(g.set_wait_deadline(deadline)?),
            None => {
                let mut config = d.settings.config.clone();
                config.wait_deadline = deadline;
                config.validate()?;
                d.settings.config = config;
                Ok(())
            }
        }
    }

    /// Copies the first `floats` floats of the held buffer `id` to or from
    /// host memory at `host`, through the instance's device, and waits for
    /// the copy. Holds the table of held buffers meanwhile, so that the
    /// buffer cannot be released under the copy.
    ///
    /// # Safety
    /// `host` is valid for `floats` reads (`FromHost`) or writes (`ToHost`)
    /// and stays so during the call.
    pub(crate) unsafe fn copy(
        &self,
        call: &str,
        id: u64,
        data: *const f32,
        host: *mut f32,
        floats: usize,
        direction: Direction,
    ) -> FfiResult {
        let held = self.held.lock();
        let Some((key, entry)) = held.find(id) else {
            return Err(Failure::new(
                GeepsStatus::InvalidHandle,
                format!("{call}: buffer {id} is not held by this instance (never acquired, or already released)"),
            ));
        };
        if data as usize as u64 != entry.ptr.0 {
            return Err(Failure::invalid(format!(
                "{call}: `buffer->data` ({data:p}) is not the memory of buffer {id} ({:#x}); pass the geeps_buffer \
                 the acquisition filled",
                entry.ptr.0
            )));
        }
        if direction == Direction::FromHost && entry.kind == Kind::Read {
            return Err(Failure::invalid(format!(
                "{call}: buffer {id} ({}) is a read buffer, whose rows are read-only; write into a pre_update or \
                 local_access buffer",
                key.describe()
            )));
        }
        if floats > entry.floats {
            return Err(Failure::invalid(format!(
                "{call}: {floats} floats asked for, but buffer {id} holds {} (rows x row width)",
                entry.floats
            )));
        }
        if floats == 0 {
            return Ok(());
        }
        match self.device.as_ref().filter(|d| !d.info().host_addressable) {
            None => {
                let buffer = entry.ptr.0 as usize as *mut f32;
                // SAFETY: the buffer is held (and `held` stays locked, so it
                // is not released meanwhile) and holds at least `floats`
                // floats of host memory; the caller promises `host`. They
                // may overlap: `copy` is a memmove.
                unsafe {
                    match direction {
                        Direction::ToHost => std::ptr::copy(buffer, host, floats),
                        Direction::FromHost => std::ptr::copy(host, buffer, floats),
                    }
                }
                Ok(())
            }
            Some(device) => {
                let mut stream = self.copy_stream.lock();
                let s = match *stream {
                    Some(s) => s,
                    None => *stream.insert(device.create_stream()?),
                };
                // SAFETY: the buffer is a live device range of at least
                // `floats` floats while `held` is locked; the caller promises
                // `host` until this call returns, which is after the copy
                // completed (synchronize).
                unsafe {
                    match direction {
                        Direction::ToHost => device.copy_d2h(s, entry.ptr, host, floats)?,
                        Direction::FromHost => device.copy_h2d(s, host, entry.ptr, floats)?,
                    }
                }
                device.synchronize(s)?;
                Ok(())
            }
        }
    }

    /// Remembers a handle returned by a virtual acquisition.
    pub(crate) fn recorded(&self, h: GeepsHandle, kind: Kind) {
        self.recorded.lock().insert(h, kind);
    }

    /// Checks that `h` is a handle this instance's virtual calls returned,
    /// of kind `want` (any kind when None), for the call `call`.
    pub(crate) fn check_handle(&self, call: &str, h: GeepsHandle, want: Option<Kind>) -> FfiResult {
        let fail = |message: String| Err(Failure::new(GeepsStatus::InvalidHandle, format!("{call}: {message}")));
        if h == GEEPS_INVALID_HANDLE {
            return fail("handle 0 is GEEPS_INVALID_HANDLE; pass a handle returned by a geeps_virtual_* call".into());
        }
        match (self.recorded.lock().get(&h).copied(), want) {
            (None, _) => fail(format!(
                "handle {h:#x} was not returned by a geeps_virtual_* call of this instance (never recorded, or \
                 recorded by another instance)"
            )),
            (Some(kind), Some(want)) if kind != want => fail(format!(
                "handle {h:#x} was recorded by geeps_virtual_{}; this call needs one from geeps_virtual_{}",
                kind.acquired_by(),
                want.acquired_by()
            )),
            _ => Ok(()),
        }
    }

    /// The held buffer whose id (engine ticket) is `id`, with where it came
    /// from.
    pub(crate) fn held_buffer(&self, call: &str, id: u64) -> FfiResult<(Key, Entry)> {
        self.held.lock().find(id).ok_or_else(|| {
            Failure::new(
                GeepsStatus::InvalidHandle,
                format!("{call}: buffer {id} is not held by this instance (never acquired, or already released)"),
            )
        })
    }

    /// Declares a table; only before the instance joins its cluster.
    pub(crate) fn declare(&self, name: &str, kind: TableKind, rows: u32) -> FfiResult<u32> {
        let mut d = self.declaring.lock();
        if d.shut_down {
            return Err(Failure::new(GeepsStatus::ShutDown, format!("table `{name}`: the instance is shut down")));
        }
        if self.geeps.get().is_some() {
            return Err(Failure::new(
                GeepsStatus::InvalidState,
                format!("table `{name}` is declared too late: tables are declared before the first virtual call"),
            ));
        }
        // The engine checks these when it joins; checking them here as well
        // keeps one bad declaration from making the instance unusable.
        let reason = if rows == 0 {
            Some("it has 0 rows".to_string())
        } else if rows >= 1 << 31 {
            Some("it has more than 2^31 rows".to_string())
        } else if d.tables.iter().any(|(n, _, _)| n == name) {
            Some("the name is declared twice".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Failure::new(GeepsStatus::InvalidConfig, format!("table `{name}`: {reason}")));
        }
        d.tables.push((name.to_string(), kind, rows));
        Ok(d.tables.len() as u32 - 1)
    }

    /// The engine instance, joining the cluster first if it has not yet.
    pub(crate) fn join(&self) -> FfiResult<&Geeps> {
        if let Some(g) = self.geeps.get() {
            return Ok(g);
        }
        let d = self.declaring.lock();
        if let Some(g) = self.geeps.get() {
            return Ok(g);
        }
        if d.shut_down {
            return Err(Failure::new(GeepsStatus::ShutDown, "the instance was shut down before it joined its cluster"));
        }
        let mut builder = Geeps::builder(d.settings.config.clone());
        if let Some(device) = &self.device {
            builder.device(Arc::clone(device));
        }
        for (name, kind, rows) in &d.tables {
            match kind {
                TableKind::Parameter => builder.parameter_table(name, *rows),
                TableKind::Local => builder.local_table(name, *rows),
            };
        }
        let claim = match &d.settings.cluster {
            Some((cluster, rank)) => {
                let (claim, transport) = cluster.claim(*rank)?;
                builder.transport(transport);
                Some(claim)
            }
            None => None,
        };
        match builder.build() {
            Ok(g) => {
                *self.claim.lock() = claim;
                // We hold `declaring` and saw the cell empty, so this sets it.
                Ok(self.geeps.get_or_init(|| g))
            }
            Err(e) => {
                if let Some(claim) = claim {
                    claim.release();
                }
                Err(e.into())
            }
        }
    }

    /// The engine instance for a real call (`call`), which never joins.
    pub(crate) fn joined(&self, call: &str) -> FfiResult<&Geeps> {
        if let Some(g) = self.geeps.get() {
            return Ok(g);
        }
        let status = if self.declaring.lock().shut_down { GeepsStatus::ShutDown } else { GeepsStatus::InvalidState };
        Err(Failure::new(
            status,
            format!("{call}: the instance has not finished its virtual iteration; call geeps_finish_virtual_iteration first"),
        ))
    }

    /// Stops the instance; idempotent.
    pub(crate) fn shutdown(&self) -> FfiResult {
        let mut d = self.declaring.lock();
        self.stopped.store(true, Ordering::Release);
        match self.geeps.get() {
            Some(g) => {
                g.shutdown()?;
                // The engine has left its cluster: mark its rank as left,
                // so that the cluster may shut down.
                self.claim.lock().take();
                Ok(())
            }
            None => {
                d.shut_down = true;
                Ok(())
            }
        }
    }

    /// (rank, workers, row width), known before the instance joins.
    pub(crate) fn shape(&self) -> (usize, usize, usize) {
        match self.geeps.get() {
            Some(g) => (g.rank(), g.num_workers(), g.row_width()),
            None => {
                let d = self.declaring.lock();
                let (rank, workers) = d.settings.cluster.as_ref().map_or((0, 1), |(c, r)| (*r, c.workers()));
                (rank, workers, d.settings.config.row_width)
            }
        }
    }

    /// Acquires a buffer and records it as held under `key` (None: under its
    /// own ticket, for keyed calls).
    pub(crate) fn acquire(
        &self,
        call: &str,
        key: Option<Key>,
        kind: Kind,
        get: impl FnOnce(&Geeps) -> CoreResult<RawBuffer>,
    ) -> FfiResult<RawBuffer> {
        let g = self.joined(call)?;
        if let Some(key) = key {
            if let Key::Handle(h) = key {
                self.check_handle(call, h, Some(kind))?;
            }
            self.held.lock().check_free(key)?;
        }
        let raw = get(g)?;
        let key = key.unwrap_or(Key::Buffer(raw.ticket));
        let entry = Entry { ticket: raw.ticket, kind, ptr: raw.ptr, floats: raw.floats };
        if let Err(f) = self.held.lock().insert(key, entry) {
            // Another thread acquired the same handle meanwhile: give this
            // buffer back unchanged, the other one stays held.
            let _ = g.release_raw(raw.ticket, kind.give_back());
            return Err(f);
        }
        Ok(raw)
    }

    /// Releases the buffer held under `key`. A release the engine refuses
    /// leaves the buffer held, as the engine does.
    pub(crate) fn release(&self, call: &str, key: Key, how: ReleaseAs) -> FfiResult {
        let g = self.joined(call)?;
        if let Key::Handle(h) = key {
            self.check_handle(call, h, None)?;
        }
        let entry = self.held.lock().take(key, how, call)?;
        if let Err(e) = g.release_raw(entry.ticket, how) {
            let _ = self.held.lock().insert(key, entry);
            return Err(e.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use geeps_core::{keys, Config, Slack, TableId};

    use super::*;

    fn status<T>(r: FfiResult<T>) -> GeepsStatus {
        r.err().map_or(GeepsStatus::Ok, |f| f.status)
    }

    fn settings() -> Settings {
        let mut config = Config::default();
        config.row_width = 4;
        config.device_memory = 1 << 20;
        Settings { config, cluster: None, cuda: None }
    }

    #[test]
    fn held_buffers_follow_the_engine_through_errors() {
        let ps = GeepsInstance::new(settings()).unwrap();
        let w = ps.declare("w", TableKind::Parameter, 2).unwrap();
        assert_eq!(status(ps.declare("w", TableKind::Local, 2)), GeepsStatus::InvalidConfig);
        assert_eq!(status(ps.joined("read")), GeepsStatus::InvalidState);
        let g = ps.join().unwrap();
        assert_eq!(status(ps.declare("late", TableKind::Local, 1)), GeepsStatus::InvalidState);
        let h = g.virtual_read(&keys(TableId(w), 0..2), Slack::BSP).unwrap();
        g.virtual_post_read(h).unwrap();
        g.finish_virtual_iteration().unwrap();

        let c = crate::marshal::handle_to_c(h);
        let key = Key::Handle(c);
        let unknown = ps.acquire("geeps_read", Some(key), Kind::Read, |g| Ok(g.read(h)?.into_raw()));
        let unknown = unknown.unwrap_err();
        assert_eq!(unknown.status, GeepsStatus::InvalidHandle);
        assert!(unknown.message.contains(&format!("handle {c:#x} was not returned")), "{}", unknown.message);
        ps.recorded(c, Kind::Read);
        let wrong = ps.acquire("geeps_pre_update", Some(key), Kind::Update, |g| Ok(g.pre_update(h)?.into_raw()));
        assert!(wrong.unwrap_err().message.contains("recorded by geeps_virtual_read"));
        let raw = ps.acquire("read", Some(key), Kind::Read, |g| Ok(g.read(h)?.into_raw())).unwrap();
        assert_eq!(raw.floats, 8);
        let again = ps.acquire("read", Some(key), Kind::Read, |g| Ok(g.read(h)?.into_raw()));
        assert_eq!(status(again), GeepsStatus::InvalidHandle);
        assert_eq!(status(ps.release("update", key, ReleaseAs::Update)), GeepsStatus::InvalidHandle);
        ps.release("post_read", key, ReleaseAs::PostRead).unwrap();
        assert_eq!(status(ps.release("post_read", key, ReleaseAs::PostRead)), GeepsStatus::InvalidHandle);

        // The instance still serves its recorded read, then shuts down.
        ps.acquire("read", Some(key), Kind::Read, |g| Ok(g.read(h)?.into_raw())).unwrap();
        ps.shutdown().unwrap();
        assert_eq!(status(ps.release("post_read", key, ReleaseAs::PostRead)), GeepsStatus::ShutDown);
        ps.shutdown().unwrap();
    }

    #[test]
    fn shutdown_before_joining_refuses_everything() {
        let ps = GeepsInstance::new(settings()).unwrap();
        ps.shutdown().unwrap();
        assert_eq!(status(ps.join()), GeepsStatus::ShutDown);
        assert_eq!(status(ps.joined("read")), GeepsStatus::ShutDown);
        assert_eq!(status(ps.declare("w", TableKind::Parameter, 1)), GeepsStatus::ShutDown);
        assert_eq!(ps.shape(), (0, 1, 4));
    }
}

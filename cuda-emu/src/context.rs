//! Driver initialisation, devices' primary contexts and the context current
//! on each thread. A context owns a capacity meter, a sticky error (set by a
//! failed operation on any of its streams, reported by every later
//! synchronising call, as a real context is lost after a fault) and its
//! legacy default stream. Releasing a primary context for the last time
//! destroys it with everything created in it. Must never let a call that
//! needs a context run without a live one current on the calling thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::config::config;
use crate::handles::{Kind, Registry};
use crate::result::{
    Res, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NO_DEVICE,
    CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::stream::{Stream, StreamKind};
use crate::{log, memory, module, stream};

pub struct Context {
    pub handle: u64,
    pub device: i32,
    pub capacity: usize,
    used: Mutex<usize>,
    sticky: Mutex<Option<u32>>,
    legacy: Mutex<Option<Arc<Stream>>>,
    destroyed: AtomicBool,
}

impl Context {
    /// Charges `bytes` against the capacity, or OUT_OF_MEMORY.
    pub fn charge(&self, bytes: usize) -> Res<()> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        match used.checked_add(bytes).filter(|u| *u <= self.capacity) {
            Some(u) => {
                *used = u;
                Ok(())
            }
            None => Err(CUDA_ERROR_OUT_OF_MEMORY),
        }
    }

    pub fn release(&self, bytes: usize) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(bytes);
    }

    pub fn used(&self) -> usize {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sticky error, if an operation of this context has failed.
    pub fn sticky(&self) -> Res<()> {
        match *self.sticky.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(code) => Err(code),
            None => Ok(()),
        }
    }

    /// Records a fault of an asynchronous operation; the first one sticks.
    pub fn fail(&self, code: u32, what: &str) {
        let mut sticky = self.sticky.lock().unwrap_or_else(|p| p.into_inner());
        if sticky.is_none() {
            log::fault(&format!(
                "{what}: {} (sticky: every later synchronising call of this context returns it)",
                crate::result::label(code)
            ));
            *sticky = Some(code);
        }
    }

    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::Acquire)
    }

    /// The legacy default stream (stream 0), created on first use.
    pub fn legacy_stream(self: &Arc<Self>) -> Res<Arc<Stream>> {
        let mut legacy = self.legacy.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_destroyed() {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        if let Some(s) = legacy.as_ref() {
            return Ok(s.clone());
        }
        let s = Stream::spawn(self, StreamKind::Legacy);
        *legacy = Some(s.clone());
        Ok(s)
    }

    /// The legacy stream if it exists yet (for the blocking streams' implicit waits).
    pub fn existing_legacy_stream(&self) -> Option<Arc<Stream>> {
        self.legacy.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Live contexts behind their handles.
pub static CONTEXTS: Registry<Arc<Context>> = Registry::new(Kind::Context);

static INITIALIZED: AtomicBool = AtomicBool::new(false);

struct Primary {
    refs: u32,
    context: Option<Arc<Context>>,
}

fn primaries() -> &'static Mutex<Vec<Primary>> {
    static PRIMARIES: OnceLock<Mutex<Vec<Primary>>> = OnceLock::new();
    PRIMARIES.get_or_init(|| Mutex::new((0..config().devices).map(|_| Primary { refs: 0, context: None }).collect()))
}

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// `cuInit`: NO_DEVICE when the emulator is set to show none.
pub fn init() -> Res<()> {
    if config().devices <= 0 {
        return Err(CUDA_ERROR_NO_DEVICE);
    }
    // Reserve the address space now rather than in the middle of an allocation.
    let _ = memory::space();
    INITIALIZED.store(true, Ordering::Release);
    Ok(())
}

pub fn require_init() -> Res<()> {
    if INITIALIZED.load(Ordering::Acquire) {
        Ok(())
    } else {
        Err(CUDA_ERROR_NOT_INITIALIZED)
    }
}

/// Checks `device` is a visible ordinal.
pub fn check_device(device: i32) -> Res<()> {
    require_init()?;
    if (0..config().devices).contains(&device) {
        Ok(())
    } else {
        Err(CUDA_ERROR_INVALID_DEVICE)
    }
}

/// `cuDevicePrimaryCtxRetain`: the device's primary context, created if needed.
pub fn retain_primary(device: i32) -> Res<u64> {
    check_device(device)?;
    let mut primaries = primaries().lock().unwrap_or_else(|p| p.into_inner());
    let p = &mut primaries[device as usize];
    if let Some(c) = &p.context {
        p.refs += 1;
        return Ok(c.handle);
    }
    let mut made = None;
    let handle = CONTEXTS
        .insert_with(|handle| {
            let c = Arc::new(Context {
                handle,
                device,
                capacity: config().memory,
                used: Mutex::new(0),
                sticky: Mutex::new(None),
                legacy: Mutex::new(None),
                destroyed: AtomicBool::new(false),
            });
            made = Some(c.clone());
            c
        })
        .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
    p.context = made;
    p.refs = 1;
    Ok(handle)
}

/// `cuDevicePrimaryCtxRelease`: the last release destroys the context.
pub fn release_primary(device: i32) -> Res<()> {
    check_device(device)?;
    let doomed = {
        let mut primaries = primaries().lock().unwrap_or_else(|p| p.into_inner());
        let p = &mut primaries[device as usize];
        if p.refs == 0 {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        p.refs -= 1;
        if p.refs > 0 {
            return Ok(());
        }
        p.context.take()
    };
    if let Some(c) = doomed {
        destroy(&c);
    }
    Ok(())
}

/// (retain count, active) of the device's primary context.
pub fn primary_state(device: i32) -> Res<(u32, bool)> {
    check_device(device)?;
    let primaries = primaries().lock().unwrap_or_else(|p| p.into_inner());
    let p = &primaries[device as usize];
    Ok((p.refs, p.context.is_some()))
}

/// Tears down a context and everything created in it. Its streams finish
/// the work already enqueued (their threads drain, then exit).
fn destroy(c: &Arc<Context>) {
    c.destroyed.store(true, Ordering::Release);
    CONTEXTS.remove(c.handle);
    stream::destroy_context_streams(c.handle);
    if let Some(legacy) = c.legacy.lock().unwrap_or_else(|p| p.into_inner()).take() {
        legacy.close();
    }
    crate::event::destroy_context_events(c.handle);
    module::destroy_context_modules(c.handle);
    let freed = memory::space().free_context(c.handle);
    if !freed.is_empty() {
        log::debug(|| {
            let bytes: usize = freed.iter().map(|a| a.size).sum();
            format!(
                "context of device {} destroyed with {} allocations ({bytes} bytes) still live",
                c.device,
                freed.len()
            )
        });
    }
}

/// `cuCtxSetCurrent`; 0 unbinds.
pub fn set_current(handle: u64) -> Res<()> {
    require_init()?;
    if handle != 0 && CONTEXTS.get(handle).is_none() {
        return Err(CUDA_ERROR_INVALID_CONTEXT);
    }
    CURRENT.with(|c| c.set(handle));
    Ok(())
}

/// The handle bound on this thread (0 for none; possibly destroyed since).
pub fn current_handle() -> u64 {
    CURRENT.with(Cell::get)
}

/// The live context current on this thread, or INVALID_CONTEXT.
pub fn current() -> Res<Arc<Context>> {
    require_init()?;
    CONTEXTS.get(current_handle()).filter(|c| !c.is_destroyed()).ok_or(CUDA_ERROR_INVALID_CONTEXT)
}

/// The live context `handle`, or INVALID_CONTEXT.
pub fn by_handle(handle: u64) -> Res<Arc<Context>> {
    CONTEXTS.get(handle).filter(|c| !c.is_destroyed()).ok_or(CUDA_ERROR_INVALID_CONTEXT)
}

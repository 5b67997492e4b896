//! Driver initialisation, the live contexts and the context current on each
//! thread. A context owns a capacity meter and a sticky error (set by a
//! failed operation on any of its streams, reported by every later
//! synchronising call, as a real context is lost after a fault). Must never
//! let a call that needs a context run without a live one current on the
//! calling thread, nor create or tear down anything in a context (that is
//! `primary`'s job).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::config;
use crate::handles::{Kind, Registry};
use crate::result::{
    Res, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NO_DEVICE,
    CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::{log, memory};

pub struct Context {
    pub handle: u64,
    pub device: i32,
    pub capacity: usize,
    used: Mutex<usize>,
    sticky: Mutex<Option<u32>>,
    destroyed: AtomicBool,
}

impl Context {
    /// A fresh context of `device` with the configured capacity.
    pub fn new(handle: u64, device: i32) -> Context {
        Context {
            handle,
            device,
            capacity: config().memory,
            used: Mutex::new(0),
            sticky: Mutex::new(None),
            destroyed: AtomicBool::new(false),
        }
    }

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

    /// Marks the context destroyed: every later lookup refuses it.
    pub fn mark_destroyed(&self) {
        self.destroyed.store(true, Ordering::Release);
    }
}

/// Live contexts behind their handles.
pub static CONTEXTS: Registry<Arc<Context>> = Registry::new(Kind::Context);

static INITIALIZED: AtomicBool = AtomicBool::new(false);

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

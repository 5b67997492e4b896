//! The GPU's primary context: retained while any geeps object needs it
//! (the device, and every page-locked buffer it handed out), made current on
//! whichever thread calls into the driver. Must never create a context of its
//! own: sharing the primary one lets the application's CUDA code (runtime API,
//! cuBLAS, cuDNN) use geeps' buffers directly.

use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys;
use geeps_core::Result;

use super::errors::error;

pub(crate) struct Context {
    ordinal: usize,
    device: sys::CUdevice,
    raw: sys::CUcontext,
}

// SAFETY: a CUcontext is a driver handle usable from any thread once made
// current there, which `bind` does.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of `device` (GPU `ordinal`).
    pub(crate) fn retain(ordinal: usize, device: sys::CUdevice) -> Result<Arc<Context>> {
        // SAFETY: `device` came from cuDeviceGet.
        let raw = unsafe { result::primary_ctx::retain(device) }
            .map_err(|e| error(&format!("retaining the primary context of CUDA device {ordinal}"), e))?;
        let ctx = Context { ordinal, device, raw };
        ctx.bind()?;
        Ok(Arc::new(ctx))
    }

    /// Makes the context current on the calling thread. The engine calls the
    /// device from several threads, so every entry point binds first.
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { result::ctx::set_current(self.raw) }
            .map_err(|e| error(&format!("making CUDA device {}'s context current", self.ordinal), e))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `Context::retain`.
        if let Err(e) = unsafe { result::primary_ctx::release(self.device) } {
            tracing::warn!("releasing CUDA device {}'s primary context: {e}", self.ordinal);
        }
    }
}

//! Primary contexts and the current context: retain, release, bind, query,
//! and `cuCtxSynchronize`. Must never create a context other than a
//! device's primary one.

use std::ffi::{c_int, c_uint, c_void};

use super::guard::{guard, handle, key, put};
use crate::result::CUresult;
use crate::stream_table::context_streams;
use crate::{context, primary, racecheck};

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, device: c_int) -> CUresult {
    guard("cuDevicePrimaryCtxRetain", || {
        if ctx.is_null() {
            return put(ctx, std::ptr::null_mut());
        }
        let h = primary::retain_primary(device)?;
        put(ctx, handle(h))
    })
}

#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(device: c_int) -> CUresult {
    guard("cuDevicePrimaryCtxRelease_v2", || primary::release_primary(device))
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(device: c_int, flags: *mut c_uint, active: *mut c_int) -> CUresult {
    guard("cuDevicePrimaryCtxGetState", || {
        let (_, live) = primary::primary_state(device)?;
        put(flags, 0)?;
        put(active, live as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: *mut c_void) -> CUresult {
    guard("cuCtxSetCurrent", || context::set_current(key(ctx)))
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut *mut c_void) -> CUresult {
    guard("cuCtxGetCurrent", || {
        context::require_init()?;
        let live = context::by_handle(context::current_handle()).map(|c| c.handle).unwrap_or(0);
        put(ctx, handle(live))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut c_int) -> CUresult {
    guard("cuCtxGetDevice", || put(device, context::current()?.device))
}

/// Waits for every stream of the current context.
#[no_mangle]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    guard("cuCtxSynchronize", || {
        let ctx = context::current()?;
        for s in context_streams(&ctx) {
            let seen = racecheck::snapshot(s.progress.lane);
            s.progress.wait_for(s.progress.mark());
            if let Some(c) = seen {
                racecheck::host_joins(&c);
            }
        }
        ctx.sticky()
    })
}

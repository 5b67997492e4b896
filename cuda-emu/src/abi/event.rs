//! Events: create, record, query, synchronise, destroy. Must never block
//! except in `cuEventSynchronize`.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use super::guard::{guard, handle, key, put, refuse};
use crate::context;
use crate::event::{Event, EVENTS};
use crate::result::{
    CUresult, Res, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::stream_table;

fn live(call: &str, e: *mut c_void) -> Res<Arc<Event>> {
    context::require_init()?;
    EVENTS
        .get(key(e))
        .map_or_else(|| refuse(CUDA_ERROR_INVALID_HANDLE, || format!("{call}: event {e:?} is not live")), Ok)
}

/// The sticky error of the event's context, if that context still lives.
fn sticky_of(event: &Event) -> Res<()> {
    context::by_handle(event.context).map_or(Ok(()), |c| c.sticky())
}

#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(out: *mut *mut c_void, flags: c_uint) -> CUresult {
    guard("cuEventCreate", || {
        let ctx = context::current()?;
        // BLOCKING_SYNC | DISABLE_TIMING | INTERPROCESS (which needs DISABLE_TIMING)
        if out.is_null() || flags & !0x7 != 0 || (flags & 0x4 != 0 && flags & 0x2 == 0) {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("cuEventCreate flags {flags:#x}"));
        }
        let h = EVENTS.insert(Arc::new(Event::new(ctx.handle))).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        put(out, handle(h))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuEventRecord(e: *mut c_void, s: *mut c_void) -> CUresult {
    guard("cuEventRecord", || {
        let event = live("cuEventRecord", e)?;
        let stream = stream_table::resolve(key(s))?;
        stream.context().sticky()?;
        event.record(&stream.progress);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(e: *mut c_void) -> CUresult {
    guard("cuEventQuery", || {
        let event = live("cuEventQuery", e)?;
        sticky_of(&event)?;
        if event.is_complete() {
            Ok(())
        } else {
            Err(CUDA_ERROR_NOT_READY)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(e: *mut c_void) -> CUresult {
    guard("cuEventSynchronize", || {
        let event = live("cuEventSynchronize", e)?;
        event.synchronize();
        sticky_of(&event)
    })
}

/// A pending record still completes; the handle is gone at once.
#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(e: *mut c_void) -> CUresult {
    guard("cuEventDestroy_v2", || {
        context::require_init()?;
        match EVENTS.remove(key(e)) {
            Some(_) => Ok(()),
            None => refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuEventDestroy_v2({e:?}): not a live event")),
        }
    })
}

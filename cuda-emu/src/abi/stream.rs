//! Streams: create, destroy, synchronise, query, and `cuStreamWaitEvent`.
//! Must never block while enqueuing (only the synchronise call waits).

use std::ffi::{c_int, c_uint, c_void};

use super::guard::{guard, handle, key, put, refuse};
use crate::context;
use crate::event::EVENTS;
use crate::ops::Op;
use crate::racecheck;
use crate::result::{
    CUresult, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_READY, CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::stream::{Stream, StreamKind, CU_STREAM_NON_BLOCKING};
use crate::stream_table::{self, submit, STREAMS};

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(out: *mut *mut c_void, flags: c_uint) -> CUresult {
    guard("cuStreamCreate", || {
        let ctx = context::current()?;
        if out.is_null() || flags & !CU_STREAM_NON_BLOCKING != 0 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("cuStreamCreate flags {flags:#x}"));
        }
        let kind = if flags & CU_STREAM_NON_BLOCKING != 0 { StreamKind::NonBlocking } else { StreamKind::Blocking };
        let h = STREAMS.insert(Stream::spawn(&ctx, kind)).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        put(out, handle(h))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    out: *mut *mut c_void,
    flags: c_uint,
    _priority: c_int,
) -> CUresult {
    cuStreamCreate(out, flags)
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamGetFlags(s: *mut c_void, flags: *mut c_uint) -> CUresult {
    guard("cuStreamGetFlags", || {
        let s = stream_table::resolve(key(s))?;
        put(flags, if s.kind == StreamKind::NonBlocking { CU_STREAM_NON_BLOCKING } else { 0 })
    })
}

/// Returns at once; the stream's queued work still runs.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(s: *mut c_void) -> CUresult {
    guard("cuStreamDestroy_v2", || {
        context::require_init()?;
        match STREAMS.remove(key(s)) {
            Some(s) => {
                s.close();
                Ok(())
            }
            None => refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuStreamDestroy_v2({s:?}): not a live stream")),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamSynchronize(s: *mut c_void) -> CUresult {
    guard("cuStreamSynchronize", || {
        let s = stream_table::resolve(key(s))?;
        let seen = racecheck::snapshot(s.progress.lane);
        s.progress.wait_for(s.progress.mark());
        if let Some(c) = seen {
            racecheck::host_joins(&c);
        }
        s.context().sticky()
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuStreamQuery(s: *mut c_void) -> CUresult {
    guard("cuStreamQuery", || {
        let s = stream_table::resolve(key(s))?;
        s.context().sticky()?;
        let seen = racecheck::snapshot(s.progress.lane);
        if s.progress.poll(s.progress.mark()) {
            if let Some(c) = seen {
                racecheck::host_joins(&c);
            }
            Ok(())
        } else {
            Err(CUDA_ERROR_NOT_READY)
        }
    })
}

/// Later work on the stream waits for the event's record as of now.
#[no_mangle]
pub unsafe extern "C" fn cuStreamWaitEvent(s: *mut c_void, e: *mut c_void, flags: c_uint) -> CUresult {
    guard("cuStreamWaitEvent", || {
        let stream = stream_table::resolve(key(s))?;
        let Some(event) = EVENTS.get(key(e)) else {
            return refuse(CUDA_ERROR_INVALID_HANDLE, || format!("cuStreamWaitEvent: event {e:?} is not live"));
        };
        if flags > 1 {
            return refuse(CUDA_ERROR_INVALID_VALUE, || format!("cuStreamWaitEvent flags {flags:#x}"));
        }
        stream.context().sticky()?;
        if let Some(c) = event.clock() {
            racecheck::lane_joins(stream.progress.lane, &c);
        }
        match event.target() {
            Some((progress, seq)) if !std::sync::Arc::ptr_eq(&progress, &stream.progress) && !progress.done(seq) => {
                submit(&stream, Op::Wait { progress, seq }).map(|_| ())
            }
            _ => Ok(()),
        }
    })
}

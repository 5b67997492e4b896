//! Which streams exist: the streams created by `cuStreamCreate`, each
//! context's legacy default stream (made on first use) and each thread's
//! per-thread default stream; resolving a `CUstream` value to one; and
//! submitting work behind the implicit waits of the legacy semantics. Must
//! never hand out a stream of a destroyed context.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::context::{self, Context};
use crate::handles::{Kind, Registry};
use crate::ops::Op;
use crate::progress::Progress;
use crate::racecheck;
use crate::result::{Res, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_OUT_OF_MEMORY};
use crate::stream::{Stream, StreamKind, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};

/// Streams created by `cuStreamCreate` (and per-thread default streams).
pub static STREAMS: Registry<Arc<Stream>> = Registry::new(Kind::Stream);

/// Each context's legacy default stream, by context handle.
fn legacy_streams() -> MutexGuard<'static, HashMap<u64, Arc<Stream>>> {
    static LEGACY: OnceLock<Mutex<HashMap<u64, Arc<Stream>>>> = OnceLock::new();
    LEGACY.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// The legacy default stream (stream 0) of `ctx`, created on first use.
pub fn legacy_stream(ctx: &Arc<Context>) -> Res<Arc<Stream>> {
    let mut legacy = legacy_streams();
    if ctx.is_destroyed() {
        return Err(CUDA_ERROR_INVALID_CONTEXT);
    }
    if let Some(s) = legacy.get(&ctx.handle) {
        return Ok(s.clone());
    }
    let s = Stream::spawn(ctx, StreamKind::Legacy);
    legacy.insert(ctx.handle, s.clone());
    Ok(s)
}

/// The legacy stream of the context `handle` if it exists yet (for the blocking streams' implicit waits).
pub fn existing_legacy_stream(handle: u64) -> Option<Arc<Stream>> {
    legacy_streams().get(&handle).cloned()
}

/// Enqueues `op` on `stream` behind the implicit waits of the legacy
/// semantics; returns its sequence number. Refused on a faulted context.
pub fn submit(stream: &Stream, op: Op) -> Res<u64> {
    let ctx = stream.context();
    ctx.sticky()?;
    match stream.kind {
        StreamKind::NonBlocking => {}
        StreamKind::Legacy => {
            let blocking = STREAMS.collect(|s| s.kind == StreamKind::Blocking && s.context().handle == ctx.handle);
            for b in blocking {
                racecheck::lane_joins_lane(stream.progress.lane, b.progress.lane);
                wait_behind(stream, &b.progress)?;
            }
        }
        StreamKind::Blocking => {
            if let Some(legacy) = existing_legacy_stream(ctx.handle) {
                racecheck::lane_joins_lane(stream.progress.lane, legacy.progress.lane);
                wait_behind(stream, &legacy.progress)?;
            }
        }
    }
    stream.enqueue(op)
}

/// Makes `stream` wait for everything `other` has enqueued so far.
fn wait_behind(stream: &Stream, other: &Arc<Progress>) -> Res<()> {
    let mark = other.mark();
    if !other.done(mark) {
        stream.enqueue(Op::Wait { progress: other.clone(), seq: mark })?;
    }
    Ok(())
}

thread_local! {
    static PER_THREAD: RefCell<Vec<Arc<Stream>>> = const { RefCell::new(Vec::new()) };
}

/// The stream a `CUstream` value names: 0 and `CU_STREAM_LEGACY` the current
/// context's legacy stream, `CU_STREAM_PER_THREAD` this thread's default
/// stream, anything else a live stream handle.
pub fn resolve(handle: u64) -> Res<Arc<Stream>> {
    match handle {
        0 | CU_STREAM_LEGACY => legacy_stream(&context::current()?),
        CU_STREAM_PER_THREAD => {
            let ctx = context::current()?;
            PER_THREAD.with(|streams| {
                let mut streams = streams.borrow_mut();
                streams.retain(|s| !s.context().is_destroyed());
                if let Some(s) = streams.iter().find(|s| s.context().handle == ctx.handle) {
                    return Ok(s.clone());
                }
                let s = Stream::spawn(&ctx, StreamKind::Blocking);
                STREAMS.insert(s.clone()).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
                streams.push(s.clone());
                Ok(s)
            })
        }
        h => {
            context::require_init()?;
            STREAMS.get(h).filter(|s| !s.context().is_destroyed()).ok_or(CUDA_ERROR_INVALID_HANDLE)
        }
    }
}

/// Every stream of the context `handle` (the legacy one included, if made).
pub fn context_streams(ctx: &Arc<Context>) -> Vec<Arc<Stream>> {
    let mut all = STREAMS.collect(|s| s.context().handle == ctx.handle);
    all.extend(existing_legacy_stream(ctx.handle));
    all
}

/// Closes and unregisters every stream of the context `handle`, the legacy one last.
pub fn destroy_context_streams(handle: u64) {
    for s in STREAMS.remove_where(|s| s.context().handle == handle) {
        s.close();
    }
    if let Some(legacy) = legacy_streams().remove(&handle) {
        legacy.close();
    }
}

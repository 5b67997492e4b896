//! Devices' primary contexts: retained and released by count, created on
//! the first retain, and destroyed on the last release with everything
//! created in them (streams, events, modules, allocations). Must never
//! destroy a context another retain still holds.

use std::sync::{Arc, Mutex, OnceLock};

use crate::config::config;
use crate::context::{check_device, Context, CONTEXTS};
use crate::result::{Res, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_OUT_OF_MEMORY};
use crate::{event, log, memory, module, racecheck, stream_table};

struct Primary {
    refs: u32,
    context: Option<Arc<Context>>,
}

fn primaries() -> &'static Mutex<Vec<Primary>> {
    static PRIMARIES: OnceLock<Mutex<Vec<Primary>>> = OnceLock::new();
    PRIMARIES.get_or_init(|| Mutex::new((0..config().devices).map(|_| Primary { refs: 0, context: None }).collect()))
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
            let c = Arc::new(Context::new(handle, device));
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
    c.mark_destroyed();
    CONTEXTS.remove(c.handle);
    stream_table::destroy_context_streams(c.handle);
    event::destroy_context_events(c.handle);
    module::destroy_context_modules(c.handle);
    let freed = memory::space().free_context(c.handle);
    for a in &freed {
        racecheck::forget(a.base);
    }
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

//! The real calls by recorded handle: an acquisition hands C a buffer and
//! the matching post takes the same handle back. A handle holds at most one
//! buffer at a time. Calls in recorded order take the engine's fast path;
//! any other order still works (slow path). Marshalling only.

use geeps_core::{Geeps, RawBuffer, ReleaseAs, Result as CoreResult, TableId};

use crate::guard::guard;
use crate::held::{Key, Kind};
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{clear_out, handle_from_c, require, write_out};
use crate::status::{FfiResult, GeepsStatus};
use crate::{GeepsHandle, GeepsTable};

fn acquire(
    ps: *mut GeepsInstance,
    call: &str,
    h: GeepsHandle,
    kind: Kind,
    buf: *mut *mut f32,
    get: impl FnOnce(&Geeps) -> CoreResult<RawBuffer>,
) -> FfiResult {
    clear_out(buf);
    require(buf, "buf")?;
    let raw = INSTANCES.get(ps, "ps")?.acquire(call, Some(Key::Handle(h)), kind, get)?;
    write_out(buf, "buf", raw.ptr.0 as usize as *mut f32)
}

fn release(ps: *mut GeepsInstance, call: &str, h: GeepsHandle, how: ReleaseAs) -> FfiResult {
    INSTANCES.get(ps, "ps")?.release(call, Key::Handle(h), how)
}

/// `read` of the rows recorded by `geeps_virtual_read` as `h`: blocks until
/// they are fresh enough for the recorded slack, then `*buf` points to them
/// (`rows × row_width` floats in device memory, which is host memory on the
/// host device). Valid until `geeps_post_read(ps, h)`. On failure `*buf` is
/// NULL.
#[no_mangle]
pub extern "C" fn geeps_read(ps: *mut GeepsInstance, h: GeepsHandle, buf: *mut *mut f32) -> GeepsStatus {
    guard(|| acquire(ps, "read", h, Kind::Read, buf, |g| Ok(g.read(handle_from_c(h))?.into_raw())))
}

/// `post_read`: gives back the buffer of the read `h`.
#[no_mangle]
pub extern "C" fn geeps_post_read(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "post_read", h, ReleaseAs::PostRead))
}

/// `pre_update` of the rows recorded by `geeps_virtual_pre_update` as `h`:
/// `*buf` points to a zeroed buffer shaped like the rows. Write deltas into
/// it, then call `geeps_update(ps, h)` (or `geeps_discard_update`).
#[no_mangle]
pub extern "C" fn geeps_pre_update(ps: *mut GeepsInstance, h: GeepsHandle, buf: *mut *mut f32) -> GeepsStatus {
    guard(|| acquire(ps, "pre_update", h, Kind::Update, buf, |g| Ok(g.pre_update(handle_from_c(h))?.into_raw())))
}

/// `update`: adds the deltas of the pre-update `h` to the parameters (seen
/// by this worker at once, sent to the others at its next table clock) and
/// gives the buffer back.
#[no_mangle]
pub extern "C" fn geeps_update(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "update", h, ReleaseAs::Update))
}

/// Gives back the buffer of the pre-update `h` without applying it.
#[no_mangle]
pub extern "C" fn geeps_discard_update(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "discard_update", h, ReleaseAs::Discard))
}

/// `local_access` of the local rows recorded by `geeps_virtual_local_access`
/// as `h`: `*buf` points to them (uninitialised if recorded with
/// `fetch = false`). Valid until `geeps_post_local_access(ps, h)`.
#[no_mangle]
pub extern "C" fn geeps_local_access(ps: *mut GeepsInstance, h: GeepsHandle, buf: *mut *mut f32) -> GeepsStatus {
    guard(|| acquire(ps, "local_access", h, Kind::Local, buf, |g| Ok(g.local_access(handle_from_c(h))?.into_raw())))
}

/// `post_local_access`: stores the buffer of the local access `h` back
/// (unless it was recorded with `save = false`) and gives it back.
#[no_mangle]
pub extern "C" fn geeps_post_local_access(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "post_local_access", h, ReleaseAs::PostLocal { save: None }))
}

/// Ends this worker's clock on parameter table `table`: its updates of the
/// clock go to the other workers.
#[no_mangle]
pub extern "C" fn geeps_table_clock(ps: *mut GeepsInstance, table: GeepsTable) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.joined("table_clock")?.table_clock(TableId(table))?))
}

/// Ends this worker's clock on every parameter table, in declaration order.
#[no_mangle]
pub extern "C" fn geeps_clock(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.joined("clock")?.clock()?))
}

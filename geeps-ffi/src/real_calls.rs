//! The real calls by recorded handle: an acquisition hands C a buffer and
//! the matching post takes the same handle back. A handle holds at most one
//! buffer at a time. Calls in recorded order take the engine's fast path;
//! any other order still works (slow path). Marshalling only.

use geeps_core::{Geeps, RawBuffer, ReleaseAs, Result as CoreResult, TableId};

use crate::buffers::{hand_out, GeepsBuffer};
use crate::guard::guard;
use crate::handles::{GeepsHandle, GeepsTable};
use crate::held::{Key, Kind};
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{handle_from_c, name_handle, require, write_out};
use crate::status::{FfiResult, GeepsStatus};

fn acquire(
    ps: *mut GeepsInstance,
    call: &str,
    h: GeepsHandle,
    kind: Kind,
    out: *mut GeepsBuffer,
    get: impl FnOnce(&Geeps) -> CoreResult<RawBuffer>,
) -> FfiResult {
    hand_out(ps, out, |ps| ps.acquire(call, Some(Key::Handle(h)), kind, get)).map_err(|f| name_handle(f, h))
}

fn release(ps: *mut GeepsInstance, call: &str, h: GeepsHandle, how: ReleaseAs) -> FfiResult {
    INSTANCES.get(ps, "ps")?.release(call, Key::Handle(h), how).map_err(|f| name_handle(f, h))
}

/// `read` of the rows recorded by `geeps_virtual_read` as `h`: blocks until
/// they are fresh enough for the recorded slack, then `*out` describes them
/// (`rows × row_width` floats in device memory, which is host memory on the
/// host device). Valid until `geeps_post_read(ps, h)`. On failure `*out` is
/// zeroed.
#[no_mangle]
pub extern "C" fn geeps_read(ps: *mut GeepsInstance, h: GeepsHandle, out: *mut GeepsBuffer) -> GeepsStatus {
    guard(|| acquire(ps, "geeps_read", h, Kind::Read, out, |g| Ok(g.read(handle_from_c(h))?.into_raw())))
}

/// `post_read`: gives back the buffer of the read `h`.
#[no_mangle]
pub extern "C" fn geeps_post_read(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_post_read", h, ReleaseAs::PostRead))
}

/// `pre_update` of the rows recorded by `geeps_virtual_pre_update` as `h`:
/// `*out` describes a zeroed buffer shaped like the rows. Write deltas into
/// it, then call `geeps_update(ps, h)` (or `geeps_discard_update`). On
/// failure `*out` is zeroed.
#[no_mangle]
pub extern "C" fn geeps_pre_update(ps: *mut GeepsInstance, h: GeepsHandle, out: *mut GeepsBuffer) -> GeepsStatus {
    guard(|| acquire(ps, "geeps_pre_update", h, Kind::Update, out, |g| Ok(g.pre_update(handle_from_c(h))?.into_raw())))
}

/// `update`: adds the deltas of the pre-update `h` to the parameters (seen
/// by this worker at once, sent to the others at its next table clock) and
/// gives the buffer back.
#[no_mangle]
pub extern "C" fn geeps_update(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_update", h, ReleaseAs::Update))
}

/// Gives back the buffer of the pre-update `h` without applying it.
#[no_mangle]
pub extern "C" fn geeps_discard_update(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_discard_update", h, ReleaseAs::Discard))
}

/// `local_access` of the local rows recorded by `geeps_virtual_local_access`
/// as `h`: `*out` describes them (uninitialised if recorded with
/// `fetch = false`). Valid until `geeps_post_local_access(ps, h)`. On
/// failure `*out` is zeroed.
#[no_mangle]
pub extern "C" fn geeps_local_access(ps: *mut GeepsInstance, h: GeepsHandle, out: *mut GeepsBuffer) -> GeepsStatus {
    guard(|| {
        acquire(ps, "geeps_local_access", h, Kind::Local, out, |g| Ok(g.local_access(handle_from_c(h))?.into_raw()))
    })
}

/// `post_local_access`: stores the buffer of the local access `h` back
/// (unless it was recorded with `save = false`) and gives it back.
#[no_mangle]
pub extern "C" fn geeps_post_local_access(ps: *mut GeepsInstance, h: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_post_local_access", h, ReleaseAs::PostLocal { save: None }))
}

/// Ends this worker's clock on parameter table `table`: its updates of the
/// clock go to the other workers.
#[no_mangle]
pub extern "C" fn geeps_table_clock(ps: *mut GeepsInstance, table: GeepsTable) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.joined("geeps_table_clock")?.table_clock(TableId(table))?))
}

/// Ends this worker's clock on every parameter table, in declaration order.
#[no_mangle]
pub extern "C" fn geeps_clock(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.joined("geeps_clock")?.clock()?))
}

/// This worker's clock of parameter table `table`: how many times it has
/// called `geeps_table_clock` on it (0 before the first; `geeps_clock`
/// counts for every parameter table). A read with slack `s` made at clock
/// `c` sees every worker's updates of the clocks below `c - s`. From the
/// first virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`), also
/// after shutdown.
#[no_mangle]
pub extern "C" fn geeps_current_table_clock(ps: *const GeepsInstance, table: GeepsTable, out: *mut u64) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let clock =
            INSTANCES.get(ps, "ps")?.joined("geeps_current_table_clock")?.current_table_clock(TableId(table))?;
        write_out(out, "out", clock)
    })
}

/// Whether an operator asked the cluster to drain (the admin endpoint's
/// Drain, served by rank 0 with `GEEPS_ADMIN`): stop at the next clock
/// boundary, after saving what must survive. Always false in process. From
/// the first virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`).
#[no_mangle]
pub extern "C" fn geeps_drain_requested(ps: *const GeepsInstance, out: *mut bool) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let drain = INSTANCES.get(ps, "ps")?.joined("geeps_drain_requested")?.drain_requested();
        write_out(out, "out", drain)
    })
}

/// How many checkpoints an operator has asked for so far (the admin
/// endpoint's Checkpoint, served by rank 0 with `GEEPS_ADMIN`, relayed to
/// every rank): when it grows, save one with `geeps_checkpoint` at a clock
/// boundary the workers agree on. Always 0 in process. From the first
/// virtual call on (before it: `GEEPS_STATUS_INVALID_STATE`).
#[no_mangle]
pub extern "C" fn geeps_checkpoint_requests(ps: *const GeepsInstance, out: *mut u64) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let n = INSTANCES.get(ps, "ps")?.joined("geeps_checkpoint_requests")?.checkpoint_requests();
        write_out(out, "out", n)
    })
}

/// This worker's clock: the lowest clock of its parameter tables (they are
/// all equal when it only calls `geeps_clock`); 0 without parameter
/// tables. See `geeps_current_table_clock`.
#[no_mangle]
pub extern "C" fn geeps_current_clock(ps: *const GeepsInstance, out: *mut u64) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let clock = INSTANCES.get(ps, "ps")?.joined("geeps_current_clock")?.current_clock();
        write_out(out, "out", clock)
    })
}

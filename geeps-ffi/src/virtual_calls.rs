//! The virtual iteration from C: each `geeps_virtual_*` call is recorded by
//! the engine, not executed. Acquisitions give back a handle for the real
//! calls; releases and clocks give back only a status. The first virtual
//! call joins the instance to its cluster. Marshalling only.

use geeps_core::{Slack, TableId};

use geeps_core::{Geeps, Handle, Result as CoreResult, RowKey};

use crate::guard::guard;
use crate::handles::{GeepsHandle, GeepsTable, GEEPS_SLACK_UNBOUNDED};
use crate::held::Kind;
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{handle_from_c, handle_to_c, keys, name_handle, require, write_out};
use crate::status::{FfiResult, GeepsStatus};

/// Records an acquisition of `rows[0..n]` of `table` with `record`; `*out`
/// gets its handle, which the instance remembers as of kind `kind`.
fn acquisition(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    kind: Kind,
    out: *mut GeepsHandle,
    record: impl FnOnce(&Geeps, &[RowKey]) -> CoreResult<Handle>,
) -> FfiResult {
    require(out, "out")?;
    let keys = keys(table, rows, n)?;
    let ps = INSTANCES.get(ps, "ps")?;
    let h = handle_to_c(record(ps.join()?, &keys)?);
    ps.recorded(h, kind);
    write_out(out, "out", h)
}

/// Records the release `call` of the acquisition `h` of kind `kind`.
fn release(
    ps: *mut GeepsInstance,
    call: &str,
    h: GeepsHandle,
    kind: Kind,
    record: impl FnOnce(&Geeps, Handle) -> CoreResult<Handle>,
) -> FfiResult {
    let ps = INSTANCES.get(ps, "ps")?;
    let g = ps.join()?;
    ps.check_handle(call, h, Some(kind))?;
    record(g, handle_from_c(h)).map_err(|e| name_handle(e.into(), h))?;
    Ok(())
}

pub(crate) fn slack(s: u32) -> Slack {
    if s == GEEPS_SLACK_UNBOUNDED {
        Slack::Unbounded
    } else {
        Slack::Bounded(s)
    }
}

/// Records a `read` of `rows[0..n]` of parameter table `table`, at most
/// `slack` clocks stale (`GEEPS_SLACK_BSP`, a bound, or
/// `GEEPS_SLACK_UNBOUNDED`). `*out` gets the handle for `geeps_read`.
#[no_mangle]
pub extern "C" fn geeps_virtual_read(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    slack: u32,
    out: *mut GeepsHandle,
) -> GeepsStatus {
    guard(|| acquisition(ps, table, rows, n, Kind::Read, out, |g, k| g.virtual_read(k, self::slack(slack))))
}

/// Records the `post_read` of the read `read`.
#[no_mangle]
pub extern "C" fn geeps_virtual_post_read(ps: *mut GeepsInstance, read: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_virtual_post_read", read, Kind::Read, |g, h| g.virtual_post_read(h)))
}

/// Records a `pre_update` of `rows[0..n]` of parameter table `table`; its
/// buffer comes zeroed. `*out` gets the handle for `geeps_pre_update`.
#[no_mangle]
pub extern "C" fn geeps_virtual_pre_update(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    out: *mut GeepsHandle,
) -> GeepsStatus {
    guard(|| acquisition(ps, table, rows, n, Kind::Update, out, |g, k| g.virtual_pre_update(k)))
}

/// Records a `pre_update` of `rows[0..n]` of parameter table `table` whose
/// buffer the application overwrites whole before `geeps_update`: it comes
/// with unspecified contents instead of zeros (no pass zeroing it). Any
/// value left unwritten is sent as a delta. `*out` gets the handle for
/// `geeps_pre_update`.
#[no_mangle]
pub extern "C" fn geeps_virtual_pre_update_overwrite(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    out: *mut GeepsHandle,
) -> GeepsStatus {
    guard(|| acquisition(ps, table, rows, n, Kind::Update, out, |g, k| g.virtual_pre_update_overwrite(k)))
}

/// Records the `update` of the pre-update `pre_update`.
#[no_mangle]
pub extern "C" fn geeps_virtual_update(ps: *mut GeepsInstance, pre_update: GeepsHandle) -> GeepsStatus {
    guard(|| release(ps, "geeps_virtual_update", pre_update, Kind::Update, |g, h| g.virtual_update(h)))
}

/// Records a `local_access` of `rows[0..n]` of local table `table`;
/// `fetch = false` hands out the buffer without loading the rows (for data
/// that is overwritten every mini-batch). `*out` gets the handle for
/// `geeps_local_access`.
#[no_mangle]
pub extern "C" fn geeps_virtual_local_access(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    fetch: bool,
    out: *mut GeepsHandle,
) -> GeepsStatus {
    guard(|| acquisition(ps, table, rows, n, Kind::Local, out, |g, k| g.virtual_local_access(k, fetch)))
}

/// Records the `post_local_access` of `access`; `save = false` does not
/// store the buffer back.
#[no_mangle]
pub extern "C" fn geeps_virtual_post_local_access(
    ps: *mut GeepsInstance,
    access: GeepsHandle,
    save: bool,
) -> GeepsStatus {
    guard(|| {
        release(ps, "geeps_virtual_post_local_access", access, Kind::Local, |g, h| g.virtual_post_local_access(h, save))
    })
}

/// Records a `post_local_access` of `access` that declares its rows'
/// contents dead until written again: `geeps_post_local_access` on that
/// handle then saves nothing, not even what the previous access of the rows
/// posted with `save = true` and handed over with the buffer.
#[no_mangle]
pub extern "C" fn geeps_virtual_discard_local_access(ps: *mut GeepsInstance, access: GeepsHandle) -> GeepsStatus {
    guard(|| {
        release(ps, "geeps_virtual_discard_local_access", access, Kind::Local, |g, h| g.virtual_discard_local_access(h))
    })
}

/// Records a `table_clock` of parameter table `table`.
#[no_mangle]
pub extern "C" fn geeps_virtual_table_clock(ps: *mut GeepsInstance, table: GeepsTable) -> GeepsStatus {
    guard(|| {
        INSTANCES.get(ps, "ps")?.join()?.virtual_table_clock(TableId(table))?;
        Ok(())
    })
}

/// Records a `table_clock` of every parameter table, in declaration order.
#[no_mangle]
pub extern "C" fn geeps_virtual_clock(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.join()?.virtual_clock()?))
}

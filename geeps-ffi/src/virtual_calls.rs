//! The virtual iteration from C: each `geeps_virtual_*` call is recorded by
//! the engine, not executed. Acquisitions give back a handle for the real
//! calls; releases and clocks give back only a status. The first virtual
//! call joins the instance to its cluster. Marshalling only.

use geeps_core::{Slack, TableId};

use crate::guard::guard;
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{handle_from_c, handle_to_c, keys, require, write_out};
use crate::status::GeepsStatus;
use crate::{GeepsHandle, GeepsTable, GEEPS_SLACK_UNBOUNDED};

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
    guard(|| {
        require(out, "out")?;
        let keys = keys(table, rows, n)?;
        let h = INSTANCES.get(ps, "ps")?.join()?.virtual_read(&keys, self::slack(slack))?;
        write_out(out, "out", handle_to_c(h))
    })
}

/// Records the `post_read` of the read `read`.
#[no_mangle]
pub extern "C" fn geeps_virtual_post_read(ps: *mut GeepsInstance, read: GeepsHandle) -> GeepsStatus {
    guard(|| {
        INSTANCES.get(ps, "ps")?.join()?.virtual_post_read(handle_from_c(read))?;
        Ok(())
    })
}

/// Records a `pre_update` of `rows[0..n]` of parameter table `table`.
/// `*out` gets the handle for `geeps_pre_update`.
#[no_mangle]
pub extern "C" fn geeps_virtual_pre_update(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    out: *mut GeepsHandle,
) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let keys = keys(table, rows, n)?;
        let h = INSTANCES.get(ps, "ps")?.join()?.virtual_pre_update(&keys)?;
        write_out(out, "out", handle_to_c(h))
    })
}

/// Records the `update` of the pre-update `pre_update`.
#[no_mangle]
pub extern "C" fn geeps_virtual_update(ps: *mut GeepsInstance, pre_update: GeepsHandle) -> GeepsStatus {
    guard(|| {
        INSTANCES.get(ps, "ps")?.join()?.virtual_update(handle_from_c(pre_update))?;
        Ok(())
    })
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
    guard(|| {
        require(out, "out")?;
        let keys = keys(table, rows, n)?;
        let h = INSTANCES.get(ps, "ps")?.join()?.virtual_local_access(&keys, fetch)?;
        write_out(out, "out", handle_to_c(h))
    })
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
        INSTANCES.get(ps, "ps")?.join()?.virtual_post_local_access(handle_from_c(access), save)?;
        Ok(())
    })
}

/// Records a `post_local_access` of `access` that declares its rows'
/// contents dead until written again: `geeps_post_local_access` on that
/// handle then saves nothing, not even what the previous access of the rows
/// posted with `save = true` and handed over with the buffer.
#[no_mangle]
pub extern "C" fn geeps_virtual_discard_local_access(ps: *mut GeepsInstance, access: GeepsHandle) -> GeepsStatus {
    guard(|| {
        INSTANCES.get(ps, "ps")?.join()?.virtual_discard_local_access(handle_from_c(access))?;
        Ok(())
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

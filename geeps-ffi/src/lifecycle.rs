//! The life of an instance from C: create it from a config, declare its
//! tables, finish the virtual iteration, shut it down and free it, and ask
//! it its shape. Marshalling only; the phases are the engine's.

use std::ffi::c_char;
use std::time::Duration;

use geeps_core::TableKind;

use crate::config::CONFIGS;
use crate::guard::guard;
use crate::handles::GeepsTable;
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{clear_out, require, string, write_out};
use crate::status::{FfiResult, GeepsStatus};

/// Creates an instance (one worker) from `config`, which is copied. Declare
/// its tables next; it joins its cluster at its first virtual call (or at
/// `geeps_finish_virtual_iteration`), and that call reports a mismatch with
/// the other workers. A config on a CUDA device
/// (`geeps_config_set_cuda_device`) opens the GPU here: without a usable
/// driver or GPU this fails with `GEEPS_STATUS_DEVICE` and the message says
/// what is missing.
#[no_mangle]
pub extern "C" fn geeps_new(config: *const crate::config::GeepsConfig, out: *mut *mut GeepsInstance) -> GeepsStatus {
    guard(|| {
        clear_out(out);
        require(out, "out")?;
        let settings = CONFIGS.get(config, "config")?.settings();
        write_out(out, "out", INSTANCES.insert(GeepsInstance::new(settings)?))
    })
}

/// Shuts the instance down if it is not already, and frees it. Buffers it
/// handed out are invalid afterwards. Freeing NULL does nothing; freeing a
/// freed instance returns `GEEPS_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn geeps_free(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| {
        if !ps.is_null() {
            // The engine shuts down when the last reference drops: here,
            // or when a call still running on another thread returns.
            INSTANCES.remove(ps, "ps")?;
        }
        Ok(())
    })
}

/// Stops the background threads and leaves the cluster, so the other
/// workers no longer wait for this one. Idempotent. Every later call on the
/// instance but `geeps_free` and the stats returns `GEEPS_STATUS_SHUT_DOWN`;
/// buffers still held stay readable until `geeps_free`.
#[no_mangle]
pub extern "C" fn geeps_shutdown(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| INSTANCES.get(ps, "ps")?.shutdown())
}

fn declare(ps: *mut GeepsInstance, name: *const c_char, kind: TableKind, rows: u32, out: *mut GeepsTable) -> FfiResult {
    require(out, "out")?;
    let ps = INSTANCES.get(ps, "ps")?;
    let table = ps.declare(string(name, "name")?, kind, rows)?;
    write_out(out, "out", table)
}

/// Declares a parameter table (shared by all workers; updates are added)
/// of `rows` rows of the row width. `*out` gets its id, numbered from 0 in
/// declaration order across both kinds. Every worker must declare the same
/// tables in the same order.
#[no_mangle]
pub extern "C" fn geeps_parameter_table(
    ps: *mut GeepsInstance,
    name: *const c_char,
    rows: u32,
    out: *mut GeepsTable,
) -> GeepsStatus {
    guard(|| declare(ps, name, TableKind::Parameter, rows, out))
}

/// Declares a local table (this worker's private rows: inputs, activations,
/// momentum) of `rows` rows. `*out` gets its id.
#[no_mangle]
pub extern "C" fn geeps_local_table(
    ps: *mut GeepsInstance,
    name: *const c_char,
    rows: u32,
    out: *mut GeepsTable,
) -> GeepsStatus {
    guard(|| declare(ps, name, TableKind::Local, rows, out))
}

/// Ends the virtual iteration: plans device memory, builds the indexes and
/// starts the background threads. Call it once, after the virtual calls
/// (with none at all if you do not record), before any real call. On
/// failure (for example `GEEPS_STATUS_BUDGET_TOO_SMALL`) the recording is
/// kept and the call may be retried.
#[no_mangle]
pub extern "C" fn geeps_finish_virtual_iteration(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| Ok(INSTANCES.get(ps, "ps")?.join()?.finish_virtual_iteration()?))
}

/// This instance's rank in its cluster (0 for a cluster of one).
#[no_mangle]
pub extern "C" fn geeps_rank(ps: *const GeepsInstance, out: *mut usize) -> GeepsStatus {
    guard(|| write_out(out, "out", INSTANCES.get(ps, "ps")?.shape().0))
}

/// The number of workers in this instance's cluster.
#[no_mangle]
pub extern "C" fn geeps_num_workers(ps: *const GeepsInstance, out: *mut usize) -> GeepsStatus {
    guard(|| write_out(out, "out", INSTANCES.get(ps, "ps")?.shape().1))
}

/// Floats per row: every buffer holds `rows × row_width` floats, row after
/// row in the order of the access's rows.
#[no_mangle]
pub extern "C" fn geeps_row_width(ps: *const GeepsInstance, out: *mut usize) -> GeepsStatus {
    guard(|| write_out(out, "out", INSTANCES.get(ps, "ps")?.shape().2))
}

/// Changes this instance's wait deadline: a blocking call (an acquisition
/// waiting for fresh rows or pool space) that starts from now on fails with
/// `GEEPS_STATUS_TIMEOUT` after `ms` milliseconds. Calls already waiting
/// keep theirs. Use it for a long first iteration and a shorter steady
/// state; the initial value is the config's
/// (`geeps_config_set_wait_deadline_ms`, 120000 by default). 0 is
/// `GEEPS_STATUS_INVALID_CONFIG` and changes nothing; after
/// `geeps_shutdown`, `GEEPS_STATUS_SHUT_DOWN`.
#[no_mangle]
pub extern "C" fn geeps_set_wait_deadline_ms(ps: *mut GeepsInstance, ms: u64) -> GeepsStatus {
    guard(|| INSTANCES.get(ps, "ps")?.set_wait_deadline(Duration::from_millis(ms)))
}

/// This instance's wait deadline in milliseconds (see
/// `geeps_set_wait_deadline_ms`); also after `geeps_shutdown`.
#[no_mangle]
pub extern "C" fn geeps_wait_deadline_ms(ps: *const GeepsInstance, out: *mut u64) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        let ms = INSTANCES.get(ps, "ps")?.wait_deadline().as_millis();
        write_out(out, "out", u64::try_from(ms).unwrap_or(u64::MAX))
    })
}

/// Whether the `data` of this instance's buffers is host memory: true on
/// the host device (the default), false on a CUDA device, where it is a
/// device pointer to pass to kernels, `cudaMemcpy` or
/// `geeps_buffer_copy_to_host` / `geeps_buffer_copy_from_host`, and never
/// to dereference on the host.
#[no_mangle]
pub extern "C" fn geeps_host_addressable(ps: *const GeepsInstance, out: *mut bool) -> GeepsStatus {
    guard(|| {
        require(out, "out")?;
        write_out(out, "out", INSTANCES.get(ps, "ps")?.host_addressable())
    })
}

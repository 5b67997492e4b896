//! Checkpoints from C: `geeps_checkpoint` saves every parameter table and
//! this worker's state bytes, `geeps_restore` loads the newest checkpoint
//! of a folder into a fresh instance, `geeps_restored_state` hands back a
//! worker's saved bytes. Marshalling only; the format is the engine's.

use std::ffi::c_char;

use crate::guard::guard;
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{require, string, write_out};
use crate::status::{Failure, GeepsStatus};

fn bytes<'a>(ptr: *const u8, len: usize, arg: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: non-NULL; the caller promises `len` readable bytes that stay
    // unchanged during the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Saves every parameter table as of this clock into the folder `dir`,
/// with `state_len` bytes of this worker's own state (momentum, data
/// position; NULL when 0). Every worker calls it at the same clock
/// boundary, after clocking every parameter table the same number of
/// times; `dir` must be writable by every rank. On rank 0 it returns once
/// the checkpoint is complete and published atomically, and sets
/// `*written` (may be NULL) to true; elsewhere once this worker's state is
/// written, with `*written` false. Exact under BSP. The two newest
/// checkpoints are kept. Failures: `GEEPS_STATUS_CHECKPOINT` (not at a
/// clock boundary, a folder that cannot be written, a rank that never
/// wrote its state), or the status of a read that failed.
#[no_mangle]
pub extern "C" fn geeps_checkpoint(
    ps: *mut GeepsInstance,
    dir: *const c_char,
    state: *const u8,
    state_len: usize,
    written: *mut bool,
) -> GeepsStatus {
    guard(|| {
        let dir = string(dir, "dir")?;
        let state = bytes(state, state_len, "state")?;
        let ps = INSTANCES.get(ps, "ps")?;
        let done = ps.joined("geeps_checkpoint")?.checkpoint(dir, state)?.is_some();
        if !written.is_null() {
            write_out(written, "written", done)?;
        }
        Ok(())
    })
}

/// Loads the newest complete checkpoint in `dir` into this fresh instance
/// (after `geeps_finish_virtual_iteration`, before any update, clock or held
/// buffer); every worker calls it. The checkpoint may come from a cluster
/// of another size. It ends one clock on every parameter table and returns
/// when the saved rows are visible to reads at any slack. `*clock` gets the
/// clock the checkpoint was taken at (resume the application's count
/// there) and `*workers` the number of workers that saved it; both may be
/// NULL. Each saved worker's state is then available from
/// `geeps_restored_state`. Fails with `GEEPS_STATUS_CHECKPOINT` when the
/// folder holds no usable checkpoint or its tables differ from the declared
/// ones (the message says which); a damaged newest checkpoint falls back to
/// the one before.
#[no_mangle]
pub extern "C" fn geeps_restore(
    ps: *mut GeepsInstance,
    dir: *const c_char,
    clock: *mut u64,
    workers: *mut usize,
) -> GeepsStatus {
    guard(|| {
        let dir = string(dir, "dir")?;
        let ps = INSTANCES.get(ps, "ps")?;
        let restored = ps.joined("geeps_restore")?.restore(dir)?;
        if !clock.is_null() {
            write_out(clock, "clock", restored.clock)?;
        }
        if !workers.is_null() {
            write_out(workers, "workers", restored.workers)?;
        }
        *ps.restored.lock() = Some(restored);
        Ok(())
    })
}

/// Copies the state that worker `rank` saved (of the restored checkpoint)
/// into `buf[0..cap]`; `*len` gets its full length, so a call with `cap` 0
/// (and `buf` NULL) asks for the size. `GEEPS_STATUS_INVALID_STATE` before
/// a `geeps_restore`; `GEEPS_STATUS_INVALID_ARGUMENT` for a rank the
/// checkpoint does not have or a `cap` smaller than the state (nothing is
/// copied then).
#[no_mangle]
pub extern "C" fn geeps_restored_state(
    ps: *mut GeepsInstance,
    rank: usize,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> GeepsStatus {
    guard(|| {
        require(len, "len")?;
        let ps = INSTANCES.get(ps, "ps")?;
        let restored = ps.restored.lock();
        let Some(r) = restored.as_ref() else {
            return Err(Failure::new(
                GeepsStatus::InvalidState,
                "geeps_restored_state: no checkpoint was restored on this instance; call geeps_restore first",
            ));
        };
        let Some(state) = r.rank_states.get(rank) else {
            return Err(Failure::invalid(format!(
                "rank {rank}: the restored checkpoint holds the states of {} workers",
                r.rank_states.len()
            )));
        };
        write_out(len, "len", state.len())?;
        if cap == 0 {
            return Ok(());
        }
        if cap < state.len() {
            return Err(Failure::invalid(format!(
                "`cap` is {cap} bytes; rank {rank}'s state needs {} (pass cap 0 to ask for the size)",
                state.len()
            )));
        }
        if buf.is_null() {
            return Err(Failure::null("buf"));
        }
        // SAFETY: non-NULL, the caller promises `cap >= state.len()` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), buf, state.len()) };
        Ok(())
    })
}

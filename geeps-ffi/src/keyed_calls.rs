//! Keyed calls: accesses that were not recorded, served on the engine's slow
//! path (index built on the fly, no prefetch; counted in the stats). Each
//! gives C a `geeps_buffer` whose id releases it. Marshalling only.

use geeps_core::{Geeps, RawBuffer, ReleaseAs, Result as CoreResult};

use crate::buffers::{hand_out, GeepsBuffer};
use crate::guard::guard;
use crate::handles::GeepsTable;
use crate::held::{Key, Kind};
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::keys;
use crate::status::{FfiResult, GeepsStatus};
use crate::virtual_calls::slack;

fn acquire(
    ps: *mut GeepsInstance,
    call: &str,
    kind: Kind,
    out: *mut GeepsBuffer,
    get: impl FnOnce(&Geeps) -> CoreResult<RawBuffer>,
) -> FfiResult {
    hand_out(ps, out, |ps| ps.acquire(call, None, kind, get))
}

fn release(ps: *mut GeepsInstance, call: &str, id: u64, how: ReleaseAs) -> FfiResult {
    INSTANCES.get(ps, "ps")?.release(call, Key::Buffer(id), how)
}

/// `read` of `rows[0..n]` of parameter table `table` with staleness bound
/// `slack`, without a recorded handle. Release with `geeps_post_read_buffer`.
/// On failure `*out` is zeroed.
#[no_mangle]
pub extern "C" fn geeps_read_keys(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    slack: u32,
    out: *mut GeepsBuffer,
) -> GeepsStatus {
    guard(|| {
        let keys = keys(table, rows, n)?;
        acquire(ps, "geeps_read_keys", Kind::Read, out, |g| Ok(g.read_keys(&keys, self::slack(slack))?.into_raw()))
    })
}

/// `pre_update` of `rows[0..n]` of parameter table `table`, without a
/// recorded handle: a zeroed buffer. Release with `geeps_update_buffer` or
/// `geeps_discard_buffer`.
#[no_mangle]
pub extern "C" fn geeps_pre_update_keys(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    out: *mut GeepsBuffer,
) -> GeepsStatus {
    guard(|| {
        let keys = keys(table, rows, n)?;
        acquire(ps, "geeps_pre_update_keys", Kind::Update, out, |g| Ok(g.pre_update_keys(&keys)?.into_raw()))
    })
}

/// `local_access` of `rows[0..n]` of local table `table`, without a recorded
/// handle (`fetch = false`: not loaded). Release with
/// `geeps_post_local_access_buffer`.
#[no_mangle]
pub extern "C" fn geeps_local_access_keys(
    ps: *mut GeepsInstance,
    table: GeepsTable,
    rows: *const u32,
    n: usize,
    fetch: bool,
    out: *mut GeepsBuffer,
) -> GeepsStatus {
    guard(|| {
        let keys = keys(table, rows, n)?;
        acquire(ps, "geeps_local_access_keys", Kind::Local, out, |g| Ok(g.local_access_keys(&keys, fetch)?.into_raw()))
    })
}

/// `post_read` of a keyed read's buffer.
#[no_mangle]
pub extern "C" fn geeps_post_read_buffer(ps: *mut GeepsInstance, id: u64) -> GeepsStatus {
    guard(|| release(ps, "geeps_post_read_buffer", id, ReleaseAs::PostRead))
}

/// `update` of a keyed pre-update's buffer: applies its deltas.
#[no_mangle]
pub extern "C" fn geeps_update_buffer(ps: *mut GeepsInstance, id: u64) -> GeepsStatus {
    guard(|| release(ps, "geeps_update_buffer", id, ReleaseAs::Update))
}

/// Gives back a keyed pre-update's buffer without applying it.
#[no_mangle]
pub extern "C" fn geeps_discard_buffer(ps: *mut GeepsInstance, id: u64) -> GeepsStatus {
    guard(|| release(ps, "geeps_discard_buffer", id, ReleaseAs::Discard))
}

/// `post_local_access` of a keyed local access's buffer; `save = false`
/// does not store it back.
#[no_mangle]
pub extern "C" fn geeps_post_local_access_buffer(ps: *mut GeepsInstance, id: u64, save: bool) -> GeepsStatus {
    guard(|| release(ps, "geeps_post_local_access_buffer", id, ReleaseAs::PostLocal { save: Some(save) }))
}

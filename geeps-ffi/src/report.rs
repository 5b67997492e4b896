//! Stats and the placement plan for C: as versioned structs (the caller sets
//! `struct_size`, so fields can be appended without breaking old callers)
//! and as the engine's own text. Copies the engine's numbers; computes none.

use std::ffi::c_char;

use geeps_core::{CallKind, Plan, Stats};

use crate::guard::guard;
use crate::instance::{GeepsInstance, INSTANCES};
use crate::marshal::{write_string, write_versioned, Versioned};
use crate::status::{FfiResult, GeepsStatus};

/// The kinds of real call, indexing `geeps_stats.calls`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeepsCallKind {
    Read = 0,
    PostRead = 1,
    PreUpdate = 2,
    Update = 3,
    LocalAccess = 4,
    PostLocalAccess = 5,
    TableClock = 6,
}

/// The number of call kinds.
pub const GEEPS_CALL_KINDS: usize = 7;

fn slot(kind: CallKind) -> GeepsCallKind {
    match kind {
        CallKind::Read => GeepsCallKind::Read,
        CallKind::PostRead => GeepsCallKind::PostRead,
        CallKind::PreUpdate => GeepsCallKind::PreUpdate,
        CallKind::Update => GeepsCallKind::Update,
        CallKind::LocalAccess => GeepsCallKind::LocalAccess,
        CallKind::PostLocalAccess => GeepsCallKind::PostLocalAccess,
        CallKind::TableClock => GeepsCallKind::TableClock,
    }
}

/// Count and blocked time of one kind of call.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct GeepsCallStats {
    pub count: u64,
    pub blocked_seconds: f64,
}

/// A snapshot of an instance's counters since `geeps_finish_virtual_iteration`
/// (or `geeps_stats_reset`). Set `struct_size = sizeof(geeps_stats)` before
/// the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GeepsStats {
    /// In: the caller's `sizeof(geeps_stats)`. Out: the bytes written.
    pub struct_size: usize,
    pub wall_seconds: f64,
    /// Time the application spent blocked inside geeps calls.
    pub blocked_seconds: f64,
    /// `blocked_seconds / wall_seconds`: the application's stall fraction.
    pub stall_fraction: f64,
    pub bytes_host_to_device: u64,
    pub bytes_device_to_host: u64,
    /// Calls not served from the recorded sequence's prefetch.
    pub slow_path_calls: u64,
    /// Acquisitions served from a prefetched buffer.
    pub prefetch_hits: u64,
    /// Times the prefetcher restarted because the calls left recorded order.
    pub resyncs: u64,
    /// Indexed by `geeps_call_kind`.
    pub calls: [GeepsCallStats; GEEPS_CALL_KINDS],
}

// SAFETY: repr(C), starts with `struct_size`, plain numbers only.
unsafe impl Versioned for GeepsStats {}

impl From<&Stats> for GeepsStats {
    fn from(s: &Stats) -> Self {
        let mut calls = [GeepsCallStats::default(); GEEPS_CALL_KINDS];
        for (kind, c) in &s.calls {
            calls[slot(*kind) as usize] = GeepsCallStats { count: c.count, blocked_seconds: c.blocked.as_secs_f64() };
        }
        GeepsStats {
            struct_size: std::mem::size_of::<GeepsStats>(),
            wall_seconds: s.wall.as_secs_f64(),
            blocked_seconds: s.blocked.as_secs_f64(),
            stall_fraction: s.stall_fraction,
            bytes_host_to_device: s.bytes_host_to_device,
            bytes_device_to_host: s.bytes_device_to_host,
            slow_path_calls: s.slow_path_calls,
            prefetch_hits: s.prefetch_hits,
            resyncs: s.resyncs,
            calls,
        }
    }
}

/// The placement plan made by `geeps_finish_virtual_iteration`. Set
/// `struct_size = sizeof(geeps_plan)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GeepsPlan {
    /// In: the caller's `sizeof(geeps_plan)`. Out: the bytes written.
    pub struct_size: usize,
    /// The device memory budget, bytes.
    pub budget: usize,
    /// The largest total size of access buffers held at once, bytes.
    pub peak_bytes: usize,
    /// Position in the recorded sequence where the peak occurs; -1 if none.
    pub peak_position: i64,
    /// The most the access buffer pool may allocate, bytes: what the budget
    /// leaves after the data placed on the device. The pool allocates on
    /// demand, so it uses less when the iteration needs less: see
    /// `pool_allocated_bytes`.
    pub pool_bytes: usize,
    /// False when the budget fits only one peak (no prefetch overlap).
    pub double_buffered: bool,
    pub local_device_bytes: usize,
    pub local_host_bytes: usize,
    pub param_device_bytes: usize,
    pub param_host_bytes: usize,
    /// Bytes of device memory the access buffer pool has really allocated
    /// at the time of the call: 0 right after
    /// `geeps_finish_virtual_iteration`, then what the iteration holds at
    /// once (prefetches included), at most `pool_bytes`.
    pub pool_allocated_bytes: usize,
    /// Local accesses of the recorded iteration served in place, in the
    /// table's own device memory (no buffer, no copy).
    pub local_in_place: usize,
    /// Local accesses served through a pool buffer (copied in, and back
    /// when saved): those whose keys are not one range of one table's rows.
    pub local_buffered: usize,
}

// SAFETY: repr(C), starts with `struct_size`, plain numbers only.
unsafe impl Versioned for GeepsPlan {}

impl GeepsPlan {
    fn new(p: &Plan, pool_allocated_bytes: usize) -> Self {
        GeepsPlan {
            struct_size: std::mem::size_of::<GeepsPlan>(),
            budget: p.budget,
            peak_bytes: p.peak_bytes,
            peak_position: p.peak_position.map_or(-1, |x| x as i64),
            pool_bytes: p.pool_bytes,
            double_buffered: p.double_buffered,
            local_device_bytes: p.local_device_bytes,
            local_host_bytes: p.local_host_bytes,
            param_device_bytes: p.param_device_bytes,
            param_host_bytes: p.param_host_bytes,
            pool_allocated_bytes,
            local_in_place: p.local_in_place,
            local_buffered: p.local_buffered,
        }
    }
}

fn stats(ps: *const GeepsInstance) -> FfiResult<Stats> {
    Ok(INSTANCES.get(ps, "ps")?.joined("stats")?.stats())
}

/// The plan and the bytes the pool has allocated.
fn plan(ps: *const GeepsInstance) -> FfiResult<(Plan, usize)> {
    let ps = INSTANCES.get(ps, "ps")?;
    let g = ps.joined("geeps_plan_get")?;
    Ok((g.plan()?, g.pool_allocated_bytes()))
}

/// Fills `*out` with the instance's counters (also after shutdown).
#[no_mangle]
pub extern "C" fn geeps_stats_get(ps: *const GeepsInstance, out: *mut GeepsStats) -> GeepsStatus {
    guard(|| write_versioned(out, "out", GeepsStats::from(&stats(ps)?)))
}

/// The counters as one line of text, written like `snprintf`: at most
/// `cap` bytes with the NUL, and `*len` gets the full length without it.
/// `buf` may be NULL when `cap` is 0, to ask for the length.
#[no_mangle]
pub extern "C" fn geeps_stats_string(
    ps: *const GeepsInstance,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> GeepsStatus {
    guard(|| write_string(&stats(ps)?.to_string(), buf, cap, len))
}

/// Zeroes the counters and restarts the stall-fraction clock.
#[no_mangle]
pub extern "C" fn geeps_stats_reset(ps: *mut GeepsInstance) -> GeepsStatus {
    guard(|| {
        INSTANCES.get(ps, "ps")?.joined("stats_reset")?.reset_stats();
        Ok(())
    })
}

/// Fills `*out` with the placement plan (after
/// `geeps_finish_virtual_iteration`, before shutdown) and the pool's
/// allocation at the time of the call.
#[no_mangle]
pub extern "C" fn geeps_plan_get(ps: *const GeepsInstance, out: *mut GeepsPlan) -> GeepsStatus {
    guard(|| {
        let (plan, allocated) = plan(ps)?;
        write_versioned(out, "out", GeepsPlan::new(&plan, allocated))
    })
}

/// The placement plan as text, one line per table after a summary line
/// (which ends with the bytes the pool has allocated), written like
/// `geeps_stats_string`.
#[no_mangle]
pub extern "C" fn geeps_plan_string(
    ps: *const GeepsInstance,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> GeepsStatus {
    guard(|| {
        let (plan, allocated) = plan(ps)?;
        let text = plan.to_string();
        let (summary, tables) = text.split_once('\n').unwrap_or((&text, ""));
        write_string(&format!("{summary}; pool allocated {allocated} B\n{tables}"), buf, cap, len)
    })
}

//! Filling a buffer for one acquisition (read, pre-update, local access):
//! the waits on earlier writes and on data age, reads served in place from
//! kept publications, gathers from the cache and the local store, and this
//! worker's own deltas added back under read-my-writes. Shared by the
//! allocator thread and the application's slow path. Takes the lock of one
//! region at a time and finishes its device work before releasing it.

use crate::device::host::run_row_kernel;
use crate::device::{DevicePtr, RowOp, StreamId};
use crate::engine::acquired::Acquired;
use crate::engine::cache_write::settle_publication;
use crate::engine::index::{AccessPlan, Target};
use crate::engine::outgoing::OutgoingBuf;
use crate::engine::shared::{Shared, WaitPolicy};
use crate::engine::staging::{count, host_rows_in, Staging};
use crate::engine::store::{ParamPartition, ParamState};
use crate::engine::write_counts::WriteCounts;
use crate::error::{Error, Result};
use crate::table::Slack;
use crate::transport::bytes::{floats_from_bytes, floats_view};

/// What an acquisition fills its buffer with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fill {
    Read(Slack),
    /// A pre-update's buffer: zeroed, or left as it is (the application
    /// overwrites it whole).
    Update {
        zeroed: bool,
    },
    Local {
        fetch: bool,
    },
}

/// Names the worker holding back a data age, from the last publication.
/// This worker is never the one behind (it has ended the clocks it reads at).
pub(crate) fn behind(included: &[u64], me: usize) -> String {
    let others = included.iter().enumerate().filter(|(w, _)| *w != me);
    match others.min_by_key(|(_, c)| **c) {
        Some((w, c)) => format!("worker {w} has ended {c} clocks on it as of the last publication"),
        None => "this worker's own clocks are still in flight".into(),
    }
}

/// Waits until `needed` writes to table `t` are applied (the counter an
/// access served `in_place` or not orders itself after).
pub(crate) fn wait_for_writes(
    sh: &Shared,
    applied: &mut parking_lot::MutexGuard<'_, WriteCounts>,
    t: usize,
    needed: u64,
    in_place: bool,
    policy: WaitPolicy,
    abort: &dyn Fn() -> Option<Error>,
) -> Result<()> {
    let name = &sh.tables[t].name;
    sh.wait(applied, &sh.writes_cond, policy, |a| a.relevant(t, in_place) >= needed, abort, &|a| {
        format!("earlier writes to table `{name}` to be applied ({} of {needed})", a.relevant(t, in_place))
    })?;
    Ok(())
}

/// Whether an acquisition must see earlier writes to its tables applied
/// first: a fetch does (local data saved before it is read back), a read
/// does with read-my-writes, and so does any in-place local access (the
/// application writes the stored rows themselves). A zeroed buffer never
/// does, nor does a copied local buffer left unfilled: nothing is read, and
/// its save queues behind the earlier ones on the local lane.
pub(crate) fn orders_after_writes(fill: Fill, in_place: bool, read_my_writes: bool) -> bool {
    match fill {
        Fill::Update { .. } => false,
        Fill::Read(_) => read_my_writes,
        Fill::Local { fetch } => fetch || in_place,
    }
}

/// Whether a pre-update is handed an outgoing buffer rather than a pool
/// buffer: where the host addresses the device's memory (the buffer is host
/// memory) and some partition's deltas can then be taken from it as they
/// are. Message bytes are little-endian floats, so only there.
fn takes_outgoing(sh: &Shared, plan: &AccessPlan) -> bool {
    sh.host_addressable && cfg!(target_endian = "little") && plan.covers_a_partition()
}

/// Fills a buffer for one acquisition. `clock_of` gives, per table, the
/// application's clock at this call, and `issued` the writes it had issued.
#[allow(clippy::too_many_arguments)]
pub(crate) fn acquire(
    sh: &Shared,
    fill: Fill,
    plan: &AccessPlan,
    clock_of: &dyn Fn(usize) -> u64,
    issued: &WriteCounts,
    policy: WaitPolicy,
    abort: &dyn Fn() -> Option<Error>,
    staging: &mut Staging,
) -> Result<Acquired> {
    let w = sh.width();
    // Earlier writes to these tables must be applied first (read-my-writes,
    // and local data saved before it is fetched again).
    let in_place = plan.in_place.is_some();
    let mut writes_seen = Vec::with_capacity(plan.tables.len());
    {
        let mut applied = sh.writes.lock();
        let waits = orders_after_writes(fill, in_place, sh.config.read_my_writes);
        for &t in &plan.tables {
            if waits {
                wait_for_writes(sh, &mut applied, t, issued.relevant(t, in_place), in_place, policy, abort)?;
            }
            writes_seen.push((t, applied.relevant(t, in_place)));
        }
    }

    if let Some(ptr) = plan.in_place {
        return Ok(Acquired {
            buffer: None,
            outgoing: None,
            reserved: false,
            ptr,
            floats: plan.rows * w,
            ages: Vec::new(),
            writes_seen,
            carried: false,
            pinned: Vec::new(),
        });
    }

    let floats = plan.rows * w;
    if let Fill::Update { zeroed } = fill {
        if takes_outgoing(sh, plan) {
            sh.pool.reserve(floats, policy.deadline, abort)?;
            let mut outgoing = OutgoingBuf::take(&plan.outgoing, floats, zeroed);
            let ptr = outgoing.ptr();
            let ages = Vec::new();
            return Ok(Acquired {
                buffer: None,
                outgoing: Some(outgoing),
                reserved: true,
                ptr,
                floats,
                ages,
                writes_seen,
                carried: false,
                pinned: Vec::new(),
            });
        }
    }
    if let Fill::Read(slack) = fill {
        if let Some(served) = read_in_place(sh, slack, plan, clock_of, policy, abort, staging)? {
            return Ok(Acquired { writes_seen, ..served });
        }
    }
    let buffer = sh.pool.acquire(floats, policy.deadline, abort)?;
    let ptr = buffer.ptr;
    let mut acq = Acquired {
        buffer: Some(buffer),
        outgoing: None,
        reserved: false,
        ptr,
        floats,
        ages: Vec::new(),
        writes_seen,
        carried: false,
        pinned: Vec::new(),
    };
    let result = fill_buffer(sh, fill, plan, clock_of, policy, abort, staging, &mut acq);
    match result {
        Ok(()) => Ok(acq),
        Err(e) => {
            sh.discard(acq);
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn fill_buffer(
    sh: &Shared,
    fill: Fill,
    plan: &AccessPlan,
    clock_of: &dyn Fn(usize) -> u64,
    policy: WaitPolicy,
    abort: &dyn Fn() -> Option<Error>,
    staging: &mut Staging,
    acq: &mut Acquired,
) -> Result<()> {
    let w = sh.width();
    let stream = sh.alloc_stream;
    match fill {
        Fill::Update { zeroed: true } => {
            // SAFETY: the buffer is ours and `floats` long.
            unsafe { sh.device.fill_zero(stream, acq.ptr, acq.floats)? };
        }
        Fill::Update { zeroed: false } => {}
        Fill::Local { fetch: false } => {}
        Fill::Local { fetch: true } => {
            for g in &plan.groups {
                let Target::Local { table } = g.target else { continue };
                let Some(region) = sh.stores.locals[table].as_ref() else { continue };
                let host = region.host.lock();
                if let (Some(ix), Some(dev)) = (&g.device_index, region.device.ptr) {
                    // SAFETY: the index was built from this region's layout.
                    unsafe { sh.device.rows(stream, RowOp::Gather, dev, ix.id, acq.ptr, w)? };
                }
                host_rows_in(sh, stream, &host, &g.host_pairs, acq.ptr, staging)?;
                sh.device.synchronize(stream)?;
            }
        }
        Fill::Read(slack) => {
            for g in &plan.groups {
                let Target::Param { table, part } = g.target else { continue };
                let Some(parts) = sh.stores.params[table].as_ref() else { continue };
                let p = &parts[part];
                let mut st = p.state.lock();
                wait_fresh(sh, (table, part), &mut st, slack.required_age(clock_of(table)), policy, abort)?;
                if sh.config.read_my_writes {
                    catch_up_own_deltas(sh, p, &mut st, stream, staging)?;
                }
                match acq.ages.iter_mut().find(|(t, _)| *t == table) {
                    Some((_, a)) => *a = (*a).min(st.age),
                    None => acq.ages.push((table, st.age)),
                }
                if let Some(rows) = st.published.as_deref().and_then(floats_view) {
                    // The publication is the partition's content: one pass
                    // from the message into the buffer, none into the cache.
                    count(&sh.stats.h2d, g.region_pairs.len() * w);
                    // SAFETY: region pairs index the partition's rows, which the
                    // kept publication holds densely; the buffer is host memory
                    // (publications are kept only where the host addresses it).
                    unsafe {
                        run_row_kernel(
                            RowOp::Gather,
                            &g.region_pairs,
                            rows.as_ptr() as *mut f32,
                            acq.ptr.0 as *mut f32,
                            w,
                        )
                    };
                    continue;
                }
                // (Only a kept publication that cannot be viewed in place is left.)
                settle_publication(sh, p, &mut st, stream, staging)?;
                if let (Some(ix), Some(dev)) = (&g.device_index, p.device.ptr) {
                    // SAFETY: the index was built from this partition's layout.
                    unsafe { sh.device.rows(stream, RowOp::Gather, dev, ix.id, acq.ptr, w)? };
                }
                host_rows_in(sh, stream, &st.host, &g.host_pairs, acq.ptr, staging)?;
                sh.device.synchronize(stream)?;
            }
        }
    }
    sh.device.synchronize(stream)
}

/// Waits until partition `part` of `table` reaches data age `required`.
fn wait_fresh(
    sh: &Shared,
    (table, part): (usize, usize),
    st: &mut parking_lot::MutexGuard<'_, ParamState>,
    required: Option<u64>,
    policy: WaitPolicy,
    abort: &dyn Fn() -> Option<Error>,
) -> Result<()> {
    let Some(required) = required else { return Ok(()) };
    let Some(p) = sh.stores.params[table].as_ref().map(|parts| &parts[part]) else { return Ok(()) };
    let name = &sh.tables[table].name;
    sh.wait(st, &p.cond, policy, |s| s.age >= required, abort, &|s| {
        format!(
            "table `{name}` partition {part} to reach data age {required} (now {}; {})",
            s.age,
            behind(&s.included, sh.rank)
        )
    })?;
    Ok(())
}

/// Serves a read of consecutive rows from the publications kept as their
/// partitions' content, without copying: within one partition, a view of
/// its publication; across partitions, when they landed side by side in
/// one table-wide buffer (see `transport/landing.rs`). `None` when some
/// partition holds no such publication (this worker's own deltas to add
/// back, a GPU cache, or publications that landed apart): the read is then
/// gathered into a buffer as usual, after the same waits.
#[allow(clippy::too_many_arguments)]
fn read_in_place(
    sh: &Shared,
    slack: Slack,
    plan: &AccessPlan,
    clock_of: &dyn Fn(usize) -> u64,
    policy: WaitPolicy,
    abort: &dyn Fn() -> Option<Error>,
    staging: &mut Staging,
) -> Result<Option<Acquired>> {
    let Some((table, first_row)) = plan.run else { return Ok(None) };
    if !sh.host_addressable || !cfg!(target_endian = "little") {
        return Ok(None);
    }
    let across = plan.groups.len() > 1;
    if across && !sh.landing.as_ref().is_some_and(|l| l.lands(table)) {
        return Ok(None);
    }
    let Some(parts) = sh.stores.params[table].as_ref() else { return Ok(None) };
    let w = sh.width();
    let required = slack.required_age(clock_of(table));
    let mut pinned = Vec::with_capacity(plan.groups.len());
    let mut age = u64::MAX;
    for g in &plan.groups {
        let Target::Param { part, .. } = g.target else { return Ok(None) };
        let p = &parts[part];
        let mut st = p.state.lock();
        wait_fresh(sh, (table, part), &mut st, required, policy, abort)?;
        if sh.config.read_my_writes {
            catch_up_own_deltas(sh, p, &mut st, sh.alloc_stream, staging)?;
        }
        match st.published.as_ref().filter(|b| floats_view(b).is_some()) {
            Some(rows) => pinned.push(rows.clone()),
            None => return Ok(None),
        }
        age = age.min(st.age);
    }
    let Some(Target::Param { part: first_part, .. }) = plan.groups.first().map(|g| g.target) else {
        return Ok(None);
    };
    if across {
        let views: Vec<&[u8]> = pinned.iter().map(|b| &b[..]).collect();
        if !sh.landing.as_ref().is_some_and(|l| l.contiguous(table, first_part, &views)) {
            return Ok(None);
        }
    }
    let offset = (first_row - parts[first_part].layout.first_row) as usize * w;
    // SAFETY: the rows read lie in the pinned publications from `offset`
    // (one partition's, or consecutive ones landed in one buffer).
    let ptr = DevicePtr(unsafe { pinned[0].as_ptr().cast::<f32>().add(offset) } as u64);
    Ok(Some(Acquired {
        buffer: None,
        outgoing: None,
        reserved: false,
        ptr,
        floats: plan.rows * w,
        ages: vec![(table, age)],
        writes_seen: Vec::new(),
        carried: false,
        pinned,
    }))
}

/// Adds this worker's deltas that the cached rows lack (pushed or not yet
/// pushed, not yet in a publication) to them, so a read sees its own writes.
/// Only ever pending where the cache is host-reachable (see `apply_update`).
fn catch_up_own_deltas(
    sh: &Shared,
    p: &ParamPartition,
    st: &mut ParamState,
    stream: StreamId,
    staging: &mut Staging,
) -> Result<()> {
    let pending = st.inflight.iter().any(|f| !f.in_cache) || (st.dirty && !st.accum_in_cache);
    if !pending {
        return Ok(());
    }
    settle_publication(sh, p, st, stream, staging)?;
    let w = sh.width();
    let dev = p.device.ptr.map(|d| d.0 as *mut f32);
    let ParamState { host, accum, accum_in_cache, dirty, inflight, scratch, borrowed, .. } = st;
    let mut add = |deltas: &[f32]| {
        add_rows_in_order(host, &p.layout.host_order, deltas, w);
        if let Some(dev) = dev {
            let len = p.layout.device_order.len() * w;
            // SAFETY: a host-reachable region of `device_order` rows, ours
            // under the partition lock, with no device work queued on it
            // (every access synchronises before releasing the lock).
            let region = unsafe { std::slice::from_raw_parts_mut(dev, len) };
            add_rows_in_order(region, &p.layout.device_order, deltas, w);
        }
    };
    for f in inflight.iter_mut().filter(|f| !f.in_cache) {
        match floats_view(&f.deltas) {
            Some(view) => add(view),
            None => {
                scratch.resize(accum.len(), 0.0);
                floats_from_bytes(&f.deltas, scratch)?;
                add(scratch);
            }
        }
        f.in_cache = true;
    }
    if *dirty && !*accum_in_cache {
        add(borrowed.as_ref().map_or(accum.as_slice(), |d| d.floats()));
        *accum_in_cache = true;
    }
    Ok(())
}

/// `cache[slot] += deltas[order[slot]]`, row by row (`order`: slot → partition row).
fn add_rows_in_order(cache: &mut [f32], order: &[u32], deltas: &[f32], w: usize) {
    let contiguous = order.windows(2).all(|x| x[1] == x[0] + 1);
    if let (true, Some(&first)) = (contiguous, order.first()) {
        let from = first as usize * w;
        let src = &deltas[from..from + order.len() * w];
        cache.iter_mut().zip(src).for_each(|(c, d)| *c += *d);
        return;
    }
    for (slot, &r) in order.iter().enumerate() {
        let (c, d) = (&mut cache[slot * w..(slot + 1) * w], &deltas[r as usize * w..(r as usize + 1) * w]);
        c.iter_mut().zip(d).for_each(|(c, d)| *c += *d);
    }
}

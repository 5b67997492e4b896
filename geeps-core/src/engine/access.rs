//! The data path of every call: fill a buffer for a read, pre-update or local
//! access; apply an update; save local data; end a clock; merge published
//! rows. Shared by the allocator, reclaimer and puller threads and by the
//! application's slow path. Every function takes the lock of one region at a
//! time and finishes its device work before releasing it.

use std::sync::atomic::AtomicU64;

use crate::device::host::run_row_kernel;
use crate::device::{DevicePtr, PinnedBuf, RowOp, RowPair, StreamId};
use crate::engine::index::{AccessPlan, Target};
use crate::engine::outgoing::OutgoingBuf;
use crate::engine::store::{Inflight, ParamPartition, ParamState};
use crate::engine::write_counts::WriteCounts;
use crate::engine::{Acquired, Shared, WaitPolicy};
use crate::error::{Error, Result};
use crate::stats::StatsCollector;
use crate::table::Slack;
use crate::transport::bytes::{floats_from_bytes, floats_view};
use crate::transport::delta_encoding::add_bytes;
use crate::transport::{DeltaEncoding, Publish, UpdateBatch};

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

/// Page-locked scratch owned by one thread, grown on demand.
#[derive(Default)]
pub(crate) struct Staging {
    buf: Option<PinnedBuf>,
}

impl Staging {
    fn get(&mut self, sh: &Shared, floats: usize) -> Result<&mut PinnedBuf> {
        if self.buf.as_ref().is_none_or(|b| b.len() < floats) {
            self.buf = Some(sh.device.alloc_pinned(floats.next_power_of_two())?);
        }
        Ok(self.buf.as_mut().expect("set above"))
    }
}

fn count(counter: &AtomicU64, floats: usize) {
    StatsCollector::add(counter, floats as u64 * 4);
}

/// Copies host-resident rows (`pairs`: buffer row ↔ host slot) into a device buffer.
fn host_rows_in(
    sh: &Shared,
    stream: StreamId,
    host: &[f32],
    pairs: &[RowPair],
    buffer: DevicePtr,
    staging: &mut Staging,
) -> Result<()> {
    if pairs.is_empty() {
        return Ok(());
    }
    let w = sh.width();
    count(&sh.stats.h2d, pairs.len() * w);
    if sh.host_addressable {
        // SAFETY: pairs were built from this region's layout and this buffer's
        // keys; the store is only read by a gather.
        unsafe { run_row_kernel(RowOp::Gather, pairs, host.as_ptr() as *mut f32, buffer.0 as *mut f32, w) };
        return Ok(());
    }
    let stage = staging.get(sh, pairs.len() * w)?;
    for (k, p) in pairs.iter().enumerate() {
        let s = p.store_row as usize * w;
        stage[k * w..(k + 1) * w].copy_from_slice(&host[s..s + w]);
    }
    // One copy per run of consecutive buffer rows.
    let mut k = 0;
    while k < pairs.len() {
        let mut end = k + 1;
        while end < pairs.len() && pairs[end].buffer_row == pairs[end - 1].buffer_row + 1 {
            end += 1;
        }
        let dst = buffer.add_floats(pairs[k].buffer_row as usize * w);
        // SAFETY: staging holds the rows; dst lies inside the buffer.
        unsafe { sh.device.copy_h2d(stream, stage.as_ptr().add(k * w), dst, (end - k) * w)? };
        k = end;
    }
    sh.device.synchronize(stream)
}

/// A host-visible view of a whole device buffer (a d2h copy when needed).
fn host_view(sh: &Shared, stream: StreamId, acq: &Acquired, staging: &mut Staging) -> Result<*const f32> {
    if sh.host_addressable {
        return Ok(acq.ptr.0 as *const f32);
    }
    count(&sh.stats.d2h, acq.floats);
    let stage = staging.get(sh, acq.floats)?;
    // SAFETY: the buffer is live and held by the caller; staging is large enough.
    unsafe { sh.device.copy_d2h(stream, acq.ptr, stage.as_mut_ptr(), acq.floats)? };
    sh.device.synchronize(stream)?;
    Ok(stage.as_ptr())
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

/// Applies an update buffer into the outgoing deltas. Under read-my-writes
/// the cached rows must show it too: where the cache is host-reachable they
/// catch up when a read needs them (`catch_up_own_deltas`), which under BSP
/// is never, since the publication carrying these deltas arrives first; a
/// GPU-resident cache is updated here, on the device, from the buffer.
pub(crate) fn apply_update(sh: &Shared, plan: &AccessPlan, acq: &mut Acquired, staging: &mut Staging) -> Result<()> {
    let w = sh.width();
    let stream = sh.reclaim_stream;
    // Kept alive to the end: the copying path below reads the same memory.
    let outgoing = acq.outgoing.take().map(|o| o.into_shared());
    let src = host_view(sh, stream, acq, staging)? as *mut f32;
    for g in &plan.groups {
        let Target::Param { table, part } = g.target else { continue };
        let Some(parts) = sh.stores.params[table].as_ref() else { continue };
        let p = &parts[part];
        let mut st = p.state.lock();
        // The clock's first update of a whole partition from an outgoing
        // buffer: its range is the clock's deltas as they are. (The cache is
        // host-reachable here, so it catches up when a read needs it.)
        if let (false, Some(from), Some(shared)) = (st.dirty, g.whole_from, outgoing.as_ref()) {
            let from = from as usize * w;
            if let Some(range) = shared.range(from..from + st.accum.len()) {
                st.borrowed = Some(range);
                st.dirty = true;
                st.accum_in_cache = false;
                continue;
            }
        }
        st.own_deltas();
        // A recycled accumulator holds old deltas: an update of every row of
        // the partition (keys are distinct) overwrites them all; any other
        // first update starts from zeros.
        let op = match st.accum_stale {
            true if g.region_pairs.len() * w == st.accum.len() => RowOp::ScatterAssign,
            true => {
                st.accum.fill(0.0);
                RowOp::ScatterAdd
            }
            false => RowOp::ScatterAdd,
        };
        st.accum_stale = false;
        // SAFETY: region pairs index the dense partition accumulator and the
        // buffer; the lock makes the accumulator ours.
        unsafe { run_row_kernel(op, &g.region_pairs, st.accum.as_mut_ptr(), src, w) };
        let was_dirty = std::mem::replace(&mut st.dirty, true);
        // Keep the cache in step only while it already holds the whole
        // accumulator (a read caught up this clock), or where it cannot
        // catch up from the host.
        let host_reachable = sh.host_addressable || p.device.ptr.is_none();
        let eager = !host_reachable || (was_dirty && st.accum_in_cache);
        if !eager {
            st.accum_in_cache = false;
        }
        if sh.config.read_my_writes && eager {
            settle_publication(sh, p, &mut st, stream, staging)?;
            if let (Some(ix), Some(dev)) = (&g.device_index, p.device.ptr) {
                // SAFETY: built from this partition's layout; lock held.
                unsafe { sh.device.rows(stream, RowOp::ScatterAdd, dev, ix.id, acq.ptr, w)? };
            }
            // SAFETY: host pairs index this partition's host part.
            unsafe { run_row_kernel(RowOp::ScatterAdd, &g.host_pairs, st.host.as_mut_ptr(), src, w) };
            sh.device.synchronize(stream)?;
        }
    }
    Ok(())
}

/// Saves a local buffer back to the local store.
pub(crate) fn save_local(
    sh: &Shared,
    stream: StreamId,
    plan: &AccessPlan,
    acq: &Acquired,
    staging: &mut Staging,
) -> Result<()> {
    if plan.in_place.is_some() {
        return Ok(());
    }
    let w = sh.width();
    let needs_host = plan.groups.iter().any(|g| !g.host_pairs.is_empty());
    let src = if needs_host { host_view(sh, stream, acq, staging)? as *mut f32 } else { std::ptr::null_mut() };
    for g in &plan.groups {
        let Target::Local { table } = g.target else { continue };
        let Some(region) = sh.stores.locals[table].as_ref() else { continue };
        let mut host = region.host.lock();
        if let (Some(ix), Some(dev)) = (&g.device_index, region.device.ptr) {
            // SAFETY: built from this region's layout; lock held.
            unsafe { sh.device.rows(stream, RowOp::ScatterAssign, dev, ix.id, acq.ptr, w)? };
        }
        if !g.host_pairs.is_empty() {
            // On a GPU, `host_view` counted the copy that brought these rows over.
            if sh.host_addressable {
                count(&sh.stats.d2h, g.host_pairs.len() * w);
            }
            // SAFETY: host pairs index this region's host part; src covers the buffer.
            unsafe { run_row_kernel(RowOp::ScatterAssign, &g.host_pairs, host.as_mut_ptr(), src, w) };
        }
        sh.device.synchronize(stream)?;
    }
    Ok(())
}

/// Ends the current clock of `table`: takes each partition's deltas.
pub(crate) fn end_clock(sh: &Shared, table: usize, clock: u64) -> Vec<UpdateBatch> {
    let Some(parts) = sh.stores.params[table].as_ref() else { return Vec::new() };
    parts
        .iter()
        .enumerate()
        .map(|(part, p)| {
            let mut st = p.state.lock();
            let deltas = if st.dirty {
                let bytes = match st.borrowed.take() {
                    // Deltas taken from the application's buffer go as they are.
                    Some(borrowed) => borrowed.message(),
                    None => {
                        // The accumulator itself becomes the message: no copy.
                        let (fresh, stale) = p.accumulators.take(st.accum.len());
                        st.accum_stale = stale;
                        p.accumulators.message(std::mem::replace(&mut st.accum, fresh))
                    }
                };
                if sh.config.read_my_writes {
                    let in_cache = st.accum_in_cache;
                    st.inflight.push_back(Inflight { clock, deltas: bytes.clone(), in_cache });
                }
                st.accum_in_cache = true;
                st.dirty = false;
                Some(bytes)
            } else {
                None
            };
            UpdateBatch {
                table: table as u32,
                partition: part as u32,
                worker: sh.rank as u32,
                clock,
                deltas,
                encoding: DeltaEncoding::F32,
            }
        })
        .collect()
}

/// Merges published rows into the cache and advances its data age.
pub(crate) fn apply_publish(sh: &Shared, publish: &Publish, staging: &mut Staging) -> Result<()> {
    let table = publish.table as usize;
    let parts = sh
        .stores
        .params
        .get(table)
        .and_then(|p| p.as_ref())
        .ok_or_else(|| Error::UnknownTable { table: publish.table, declared: sh.tables.len() })?;
    let p = parts.get(publish.partition as usize).ok_or_else(|| {
        Error::InvalidKeys(format!("publication for partition {} of table {table}", publish.partition))
    })?;
    let stream = sh.pull_streams[publish.partition as usize % sh.pull_streams.len()];
    let mut guard = p.state.lock();
    let st = &mut *guard;
    if publish.age < st.age {
        return Ok(());
    }
    if sh.config.read_my_writes {
        // This worker's deltas the publication includes are no longer in flight.
        let mine = publish.included.get(sh.rank).copied().unwrap_or(0);
        st.inflight.retain(|f| f.clock >= mine);
    }
    let own_pending = sh.config.read_my_writes && (!st.inflight.is_empty() || st.dirty);
    let view = floats_view(&publish.rows).filter(|v| v.len() == st.accum.len() && !own_pending);
    if view.is_some() && sh.host_addressable {
        // Nothing of ours to add back, and reads gather on the host: the
        // message itself becomes the partition's content, copied nowhere
        // (into the table's landing buffer, if it did not arrive in one, so
        // that reads across partitions are served in place).
        let part = publish.partition as usize;
        let rows = match sh.landing.as_ref().filter(|l| l.lands(table)) {
            Some(l) if !l.contiguous(table, part, &[&publish.rows]) => {
                let landed = l.copy_in(publish.table, publish.partition, publish.age, &publish.rows);
                if landed.is_some() {
                    count(&sh.stats.h2d, publish.rows.len() / 4);
                }
                landed
            }
            _ => None,
        };
        st.published = Some(rows.unwrap_or_else(|| publish.rows.clone()));
    } else {
        st.published = None;
        let mut merged = std::mem::take(&mut st.scratch);
        let rows: &[f32] = match view {
            // Nothing of ours to add back: copy straight from the message.
            Some(view) => view,
            None => {
                merged.resize(st.accum.len(), 0.0);
                floats_from_bytes(&publish.rows, &mut merged)?;
                // Add back this worker's deltas the publication does not include yet.
                for f in &st.inflight {
                    add_bytes(&mut merged, &f.deltas)?;
                }
                if own_pending && st.dirty {
                    merged.iter_mut().zip(st.deltas()).for_each(|(m, d)| *m += *d);
                }
                &merged
            }
        };
        write_cache(sh, p, &mut st.host, rows, stream, staging)?;
        st.scratch = merged;
    }
    // The cache now holds every delta of ours still pending.
    st.inflight.iter_mut().for_each(|f| f.in_cache = true);
    st.accum_in_cache = true;
    st.age = publish.age;
    st.included.clone_from(&publish.included);
    drop(guard);
    p.cond.notify_all();
    Ok(())
}

/// Copies a partition's rows (partition-row order) into its cached rows.
fn write_cache(
    sh: &Shared,
    p: &ParamPartition,
    host: &mut PinnedBuf,
    rows: &[f32],
    stream: StreamId,
    staging: &mut Staging,
) -> Result<()> {
    let w = sh.width();
    for (slot, r) in p.layout.host_order.iter().enumerate() {
        let r = *r as usize;
        host[slot * w..(slot + 1) * w].copy_from_slice(&rows[r * w..(r + 1) * w]);
    }
    let Some(dev) = p.device.ptr else { return Ok(()) };
    let order = &p.layout.device_order;
    count(&sh.stats.h2d, order.len() * w);
    let contiguous = order.windows(2).all(|x| x[1] == x[0] + 1);
    if contiguous && sh.host_addressable {
        let first = order[0] as usize;
        // SAFETY: the region holds `order.len()` rows; `rows` holds them from `first`.
        unsafe { sh.device.copy_h2d(stream, rows.as_ptr().add(first * w), dev, order.len() * w)? };
    } else {
        let stage = staging.get(sh, order.len() * w)?;
        for (slot, r) in order.iter().enumerate() {
            let r = *r as usize;
            stage[slot * w..(slot + 1) * w].copy_from_slice(&rows[r * w..(r + 1) * w]);
        }
        // SAFETY: as above, from staging.
        unsafe { sh.device.copy_h2d(stream, stage.as_ptr(), dev, order.len() * w)? };
    }
    sh.device.synchronize(stream)
}

/// Copies a publication kept as the partition's content into the cached
/// rows, before anything adds to them.
fn settle_publication(
    sh: &Shared,
    p: &ParamPartition,
    st: &mut ParamState,
    stream: StreamId,
    staging: &mut Staging,
) -> Result<()> {
    let Some(rows) = st.published.take() else { return Ok(()) };
    if let Some(view) = floats_view(&rows) {
        return write_cache(sh, p, &mut st.host, view, stream, staging);
    }
    let mut values = std::mem::take(&mut st.scratch);
    values.resize(st.accum.len(), 0.0);
    floats_from_bytes(&rows, &mut values)?;
    let written = write_cache(sh, p, &mut st.host, &values, stream, staging);
    st.scratch = values;
    written
}

//! The write side of a release: an update applied into the outgoing deltas
//! (and the cache, under read-my-writes), a local buffer saved back to the
//! local store, and a clock ended into one update batch per partition.
//! Run by the reclaimer's lanes. Never sends a batch itself.

use crate::device::host::run_row_kernel;
use crate::device::{RowOp, StreamId};
use crate::engine::acquired::Acquired;
use crate::engine::cache_write::settle_publication;
use crate::engine::index::{AccessPlan, Target};
use crate::engine::shared::Shared;
use crate::engine::staging::{count, host_view, Staging};
use crate::engine::store::Inflight;
use crate::error::Result;
use crate::transport::{DeltaEncoding, UpdateBatch};

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

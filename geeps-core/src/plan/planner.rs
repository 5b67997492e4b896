//! The placement planner: paper Algorithm 2, run once at the end of the
//! virtual iteration. It decides which local and parameter rows live in device
//! memory, how big the access buffer pool is, and what the peak is. It reads
//! the recording and the budget only; it allocates nothing.

use std::collections::HashMap;
use std::fmt;

use crate::error::{Error, Result};
use crate::plan::handover::{self, Handover};
use crate::plan::range_max::RangeMax;
use crate::plan::recorder::{OpKind, RecordedOp};
use crate::table::{RowKey, TableKind, TableSpec};

/// Where one table's rows were placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePlacement {
    /// The table's name.
    pub name: String,
    /// Parameter or local.
    pub kind: TableKind,
    /// Rows kept in device memory.
    pub rows_on_device: u32,
    /// Rows kept in host memory, moved through the pool when accessed.
    pub rows_on_host: u32,
}

/// The result of planning: inspectable with [`crate::Geeps::plan`] and logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The device memory budget, bytes.
    pub budget: usize,
    /// The largest total size of access buffers held at once, bytes.
    pub peak_bytes: usize,
    /// Position in the recorded sequence where the peak occurs.
    pub peak_position: Option<usize>,
    /// Bytes of the access buffer pool.
    pub pool_bytes: usize,
    /// False when the budget fits only one peak (no prefetch overlap).
    pub double_buffered: bool,
    /// Local accesses served by handing over the buffer the previous access
    /// of the same rows posted (no save and fetch in between).
    pub handovers: usize,
    /// Local accesses of the recorded iteration served in place, in the
    /// table's own device memory (no buffer, no copy).
    pub local_in_place: usize,
    /// Local accesses served through a pool buffer: filled by a copy, and
    /// copied back when posted with save. An access whose keys are not
    /// one recorded range of one table's rows (keys of two tables, say)
    /// is always one of these.
    pub local_buffered: usize,
    /// Bytes of local data pinned in device memory.
    pub local_device_bytes: usize,
    /// Bytes of local data kept in host memory.
    pub local_host_bytes: usize,
    /// Bytes of parameter cache in device memory.
    pub param_device_bytes: usize,
    /// Bytes of parameter cache in host memory.
    pub param_host_bytes: usize,
    /// Per table, in declaration order.
    pub tables: Vec<TablePlacement>,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "budget {} B: pool {} B (peak {} B{}, {} hand-overs), local accesses {} in place / {} buffered, local {} B on device / {} B on host, params {} B on device / {} B on host",
            self.budget,
            self.pool_bytes,
            self.peak_bytes,
            if self.double_buffered { ", double-buffered" } else { ", single-buffered" },
            self.handovers,
            self.local_in_place,
            self.local_buffered,
            self.local_device_bytes,
            self.local_host_bytes,
            self.param_device_bytes,
            self.param_host_bytes
        )?;
        for t in &self.tables {
            writeln!(
                f,
                "  {:?} table `{}`: {} rows on device, {} on host",
                t.kind, t.name, t.rows_on_device, t.rows_on_host
            )?;
        }
        Ok(())
    }
}

/// A set of rows placed together: the rows first claimed by one key list.
#[derive(Debug, Clone)]
struct Unit {
    table: usize,
    rows: Vec<u32>,
    local: bool,
}

/// Row placement decided by the planner.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) plan: Plan,
    /// Per table, per row: on the device?
    pub(crate) on_device: Vec<Vec<bool>>,
    /// Per local table: its device rows in region order (pinned units contiguous).
    pub(crate) local_device_order: Vec<Vec<u32>>,
    /// Per recorded op: for a local access served in place, the row offset of
    /// its unit in the table's device region.
    pub(crate) in_place: Vec<Option<u32>>,
    /// Hand-overs kept (their rows are not pinned).
    pub(crate) handovers: Vec<Handover>,
}

struct Analysis {
    units: Vec<Unit>,
    /// Per op: the unit it accesses exactly (local ops only).
    op_unit: Vec<Option<usize>>,
}

/// The local unit whose rows are exactly `keys`, in order, if one was carved
/// out of an earlier key list.
fn carved_unit(claimed: &[HashMap<u32, usize>], units: &[Unit], keys: &[RowKey]) -> Option<usize> {
    let first = keys.first()?;
    let u = *claimed[first.table.0 as usize].get(&first.row)?;
    let unit = &units[u];
    let same = unit.local
        && unit.rows.len() == keys.len()
        && keys.iter().zip(&unit.rows).all(|(k, r)| k.table.0 as usize == unit.table && k.row == *r);
    same.then_some(u)
}

fn analyse(ops: &[RecordedOp], tables: &[TableSpec]) -> Analysis {
    let mut claimed: Vec<HashMap<u32, usize>> = tables.iter().map(|_| HashMap::new()).collect();
    // Key list -> its exact unit, or None when the list is not served in place.
    let mut by_keys: HashMap<&[RowKey], Option<usize>> = HashMap::new();
    let mut units: Vec<Unit> = Vec::new();
    let mut op_unit = vec![None; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        if !op.kind.is_acquire() || op.keys.is_empty() {
            continue;
        }
        if let Some(&u) = by_keys.get(&op.keys[..]) {
            op_unit[i] = u;
            continue;
        }
        let local = matches!(op.kind, OpKind::LocalAccess { .. });
        // The whole of one table's part of an earlier multi-table list (a
        // blob's data accessed with its state, then alone) is that unit.
        if let Some(u) = carved_unit(&claimed, &units, &op.keys).filter(|_| local) {
            by_keys.insert(&op.keys[..], Some(u));
            op_unit[i] = Some(u);
            continue;
        }
        // One table per unit: split multi-table key lists.
        let mut per_table: Vec<(usize, Vec<u32>)> = Vec::new();
        let mut overlapped = false;
        for k in op.keys.iter() {
            let t = k.table.0 as usize;
            if claimed[t].contains_key(&k.row) {
                overlapped = true;
                continue;
            }
            match per_table.iter_mut().find(|(tt, _)| *tt == t) {
                Some((_, rows)) => rows.push(k.row),
                None => per_table.push((t, vec![k.row])),
            }
        }
        let exact = local && !overlapped && per_table.len() == 1;
        for (t, rows) in per_table {
            let u = units.len();
            for r in &rows {
                claimed[t].insert(*r, u);
            }
            units.push(Unit { table: t, rows, local });
        }
        if exact {
            let u = units.len() - 1;
            by_keys.insert(&op.keys[..], Some(u));
            op_unit[i] = Some(u);
        } else {
            by_keys.insert(&op.keys[..], None);
        }
    }
    Analysis { units, op_unit }
}

/// Bytes of access buffers held at each acquisition (0 elsewhere), each
/// from its acquisition to its own release; pinned rows take none.
fn held_profile(ops: &[RecordedOp], op_unit: &[Option<usize>], pinned: &[bool], row_bytes: usize) -> Vec<u64> {
    let mut profile = vec![0u64; ops.len()];
    let mut live = 0u64;
    let mut release_at: HashMap<usize, u64> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(bytes) = release_at.remove(&i) {
            live -= bytes;
        }
        if op.kind.is_acquire() {
            let in_place = op_unit[i].is_some_and(|u| pinned[u]);
            let bytes = if in_place { 0 } else { (op.keys.len() * row_bytes) as u64 };
            live += bytes;
            if let Some(r) = op.release {
                *release_at.entry(r).or_default() += bytes;
            }
            profile[i] = live;
        }
    }
    profile
}

/// Peak of simultaneously held buffer bytes and where it occurs. Kept
/// hand-overs (see `active`) never raise it.
fn peak(ops: &[RecordedOp], op_unit: &[Option<usize>], pinned: &[bool], row_bytes: usize) -> (usize, Option<usize>) {
    let profile = held_profile(ops, op_unit, pinned, row_bytes);
    let mut best = (0usize, None);
    for (i, &b) in profile.iter().enumerate() {
        if b as usize > best.0 {
            best = (b as usize, Some(i));
        }
    }
    best
}

/// The hand-overs kept: rows not pinned (pinned rows are served in place),
/// and holding the buffer from its source's release to its target's
/// acquisition never makes the application hold more there than it holds
/// at the target. A hand-over saves a copy pair, but a buffer held across a
/// gap is pool memory that prefetches and queued releases cannot use: it
/// may fill a trough before its target, never stand above it (a blob kept
/// from the forward pass through the parameter-heavy top of the backward
/// pass would starve the prefetches there). So the peak never rises.
/// Shortest gaps first: they cost least and are the copies a prefetch can
/// least hide. Sorted by source.
fn active(
    ops: &[RecordedOp],
    handovers: &[Handover],
    op_unit: &[Option<usize>],
    pinned: &[bool],
    row_bytes: usize,
) -> Vec<Handover> {
    let mut held = RangeMax::new(&held_profile(ops, op_unit, pinned, row_bytes));
    let mut candidates: Vec<Handover> =
        handovers.iter().copied().filter(|h| !op_unit[h.source].is_some_and(|u| pinned[u])).collect();
    candidates.sort_unstable_by_key(|h| (h.target - h.release, h.source));
    let mut kept = Vec::with_capacity(candidates.len());
    for h in candidates {
        let bytes = (ops[h.source].keys.len() * row_bytes) as u64;
        let gap = h.release + 1..h.target;
        if held.max(gap.clone()) + bytes <= held.max(h.target..h.target + 1) {
            held.add(gap, bytes);
            kept.push(h);
        }
    }
    kept.sort_unstable_by_key(|h| h.source);
    kept
}

/// Below two peaks: keeps a pool of one and a half peaks (one to compute
/// with, half of one to prefetch into) and pins local units, smallest first,
/// in what is left. Small blobs are the ones a single-buffered pool fetches
/// and saves most often for least compute; pinning them also lowers the
/// peak when they are held at it. Returns the peak.
fn pin_beside_one_and_a_half_peaks(
    ops: &[RecordedOp],
    units: &[Unit],
    op_unit: &[Option<usize>],
    row_bytes: usize,
    budget: usize,
    pinned: &mut [bool],
) -> usize {
    let bytes = |u: usize| units[u].rows.len() * row_bytes;
    let mut order: Vec<usize> = (0..units.len()).filter(|&u| units[u].local).collect();
    order.sort_by_key(|&u| (bytes(u), u));
    let mut pinned_bytes = 0usize;
    let (mut current, _) = peak(ops, op_unit, pinned, row_bytes);
    // A unit refused early may fit once a later one has lowered the peak.
    let mut changed = true;
    while changed {
        changed = false;
        for &u in &order {
            if pinned[u] {
                continue;
            }
            pinned[u] = true;
            let (p, _) = peak(ops, op_unit, pinned, row_bytes);
            if pinned_bytes + bytes(u) + p + p / 2 <= budget {
                pinned_bytes += bytes(u);
                current = p;
                changed = true;
            } else {
                pinned[u] = false;
            }
        }
    }
    current
}

/// Runs Algorithm 2.
pub(crate) fn plan(ops: &[RecordedOp], tables: &[TableSpec], row_width: usize, budget: usize) -> Result<Placement> {
    let row_bytes = row_width * 4;
    let Analysis { units, op_unit } = analyse(ops, tables);
    let handovers = handover::find(ops);
    let unit_bytes = |u: &Unit| u.rows.len() * row_bytes;
    let mut pinned = vec![false; units.len()];

    let (peak0, _) = peak(ops, &op_unit, &pinned, row_bytes);
    let budget_i = budget as i128;
    let mut cur_peak;
    let mut avail: i128 = budget_i - 2 * peak0 as i128;

    // Pinning the data used at the peak shrinks the peak, and the pool with
    // it: every access then prefetches into less memory, to save the copies
    // of a few blobs. Done when it lets everything fit, or when it is the
    // only way to double buffer at all; otherwise the pool keeps two peaks
    // of the unpinned sequence and pinning uses what is left (measured on
    // AdamLike: 0.80x -> 0.99x of everything-fits at half the memory).
    let everything_fits = {
        let all = vec![true; units.len()];
        let (p, _) = peak(ops, &op_unit, &all, row_bytes);
        units.iter().map(unit_bytes).sum::<usize>() + 2 * p <= budget
    };
    let pin_at_the_peak = everything_fits || 2 * peak0 > budget;
    loop {
        let (p, at) = peak(ops, &op_unit, &pinned, row_bytes);
        cur_peak = p;
        let Some(at) = at.filter(|_| pin_at_the_peak) else { break };
        // Kept hand-overs never hold a buffer at the peak: it has no room.
        let candidate = (0..=at).rev().find_map(|i| {
            let op = &ops[i];
            let live = op.kind.is_acquire() && op.release.is_some_and(|r| r > at);
            op_unit[i].filter(|&u| live && !pinned[u] && units[u].local)
        });
        let Some(u) = candidate else { break };
        pinned[u] = true;
        let (new_peak, _) = peak(ops, &op_unit, &pinned, row_bytes);
        let mem_delta = unit_bytes(&units[u]) as i128 + 2 * (new_peak as i128 - p as i128);
        if avail < mem_delta {
            pinned[u] = false;
            break;
        }
        avail -= mem_delta;
    }

    let double_buffered = avail >= 0;
    if !double_buffered {
        // Not even two peaks fit: start again from nothing pinned.
        pinned.iter_mut().for_each(|p| *p = false);
        if budget < peak0 {
            return Err(Error::BudgetTooSmall { budget, needed: peak0, what: "one peak of access buffers" });
        }
        tracing::warn!(budget, peak = peak0, "device budget fits less than two peaks: no full double buffering");
        cur_peak = pin_beside_one_and_a_half_peaks(ops, &units, &op_unit, row_bytes, budget, &mut pinned);
    } else {
        // Then other local data, smallest first (small blobs cost the most
        // copies for the least compute to hide them behind), then parameter
        // data, while memory remains.
        let mut by_size: Vec<usize> = (0..units.len()).collect();
        by_size.sort_by_key(|&u| (unit_bytes(&units[u]), u));
        for local_pass in [true, false] {
            let order: Vec<usize> = if local_pass { by_size.clone() } else { (0..units.len()).collect() };
            for u in order {
                let unit = &units[u];
                if unit.local == local_pass && !pinned[u] && avail >= unit_bytes(unit) as i128 {
                    pinned[u] = true;
                    avail -= unit_bytes(unit) as i128;
                }
            }
        }
    }

    // Lay out what was decided.
    let mut on_device: Vec<Vec<bool>> = tables.iter().map(|t| vec![false; t.rows as usize]).collect();
    let mut local_device_order: Vec<Vec<u32>> = tables.iter().map(|_| Vec::new()).collect();
    let mut unit_offset = vec![0u32; units.len()];
    for (u, unit) in units.iter().enumerate() {
        if pinned[u] {
            if unit.local {
                unit_offset[u] = local_device_order[unit.table].len() as u32;
                local_device_order[unit.table].extend_from_slice(&unit.rows);
            }
            for r in &unit.rows {
                on_device[unit.table][*r as usize] = true;
            }
        }
    }
    let in_place: Vec<Option<u32>> =
        op_unit.iter().map(|u| u.filter(|&u| pinned[u] && units[u].local).map(|u| unit_offset[u])).collect();
    // (in place, buffered) over the recorded local accesses.
    let (local_in_place, local_buffered) = ops
        .iter()
        .zip(&in_place)
        .filter(|(op, _)| matches!(op.kind, OpKind::LocalAccess { .. }))
        .fold((0, 0), |(i, b), (_, at)| if at.is_some() { (i + 1, b) } else { (i, b + 1) });
    // Pinning more local data may have lowered the peak (fewer hand-overs).
    let (final_peak, peak_position) = peak(ops, &op_unit, &pinned, row_bytes);
    debug_assert!(final_peak <= cur_peak);
    let handovers = active(ops, &handovers, &op_unit, &pinned, row_bytes);

    let pinned_bytes: usize =
        units.iter().enumerate().filter(|(u, _)| pinned[*u]).map(|(_, unit)| unit_bytes(unit)).sum();
    let double_buffered = budget - pinned_bytes >= 2 * final_peak;
    let mut plan = Plan {
        budget,
        peak_bytes: final_peak,
        peak_position,
        pool_bytes: 0,
        double_buffered,
        handovers: handovers.len(),
        local_in_place,
        local_buffered,
        local_device_bytes: 0,
        local_host_bytes: 0,
        param_device_bytes: 0,
        param_host_bytes: 0,
        tables: Vec::new(),
    };
    for (t, spec) in tables.iter().enumerate() {
        let dev = on_device[t].iter().filter(|d| **d).count() as u32;
        let host = spec.rows - dev;
        let (d, h) = match spec.kind {
            TableKind::Local => (&mut plan.local_device_bytes, &mut plan.local_host_bytes),
            TableKind::Parameter => (&mut plan.param_device_bytes, &mut plan.param_host_bytes),
        };
        *d += dev as usize * row_bytes;
        *h += host as usize * row_bytes;
        plan.tables.push(TablePlacement {
            name: spec.name.clone(),
            kind: spec.kind,
            rows_on_device: dev,
            rows_on_host: host,
        });
    }
    plan.pool_bytes = budget - plan.local_device_bytes - plan.param_device_bytes;
    debug_assert!(plan.pool_bytes >= plan.peak_bytes);
    Ok(Placement { plan, on_device, local_device_order, in_place, handovers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::recorder::Recorder;
    use crate::table::{keys, Slack, TableId};
    use std::sync::Arc;

    /// Two layers: params p0, p1 (4 rows each); local activations a0, a1 (2 rows each).
    fn setup() -> (Vec<TableSpec>, Vec<RecordedOp>) {
        let tables = vec![
            TableSpec { name: "p0".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "p1".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 4 },
        ];
        let mut r = Recorder::default();
        for layer in 0..2u32 {
            let p = r.acquire(OpKind::Read { slack: Slack::BSP }, Arc::from(keys(TableId(layer), 0..4)));
            let a =
                r.acquire(OpKind::LocalAccess { fetch: true }, Arc::from(keys(TableId(2), layer * 2..layer * 2 + 2)));
            r.release(p, OpKind::PostRead { acquire: p }, "read").unwrap();
            r.release(a, OpKind::PostLocalAccess { acquire: a, save: true, discard: false }, "local_access").unwrap();
        }
        r.check().unwrap();
        (tables, r.ops)
    }

    const RB: usize = 4; // row width 1

    #[test]
    fn everything_fits_pins_everything() {
        let (tables, ops) = setup();
        let p = plan(&ops, &tables, 1, 1 << 20).unwrap();
        assert_eq!(p.plan.local_device_bytes, 4 * RB);
        assert_eq!(p.plan.param_device_bytes, 8 * RB);
        // With activations in place, the peak is one layer's parameters.
        assert_eq!(p.plan.peak_bytes, 4 * RB);
        assert!(p.plan.double_buffered);
        assert_eq!(p.plan.pool_bytes, (1 << 20) - 12 * RB);
        assert_eq!(p.in_place.iter().filter(|x| x.is_some()).count(), 2);
    }

    #[test]
    fn one_tables_part_of_an_earlier_multi_table_access_is_served_in_place() {
        let tables = vec![
            TableSpec { name: "data".into(), kind: TableKind::Local, rows: 4 },
            TableSpec { name: "state".into(), kind: TableKind::Local, rows: 2 },
        ];
        let mut r = Recorder::default();
        let both: Vec<_> = keys(TableId(0), 0..4).into_iter().chain(keys(TableId(1), 0..2)).collect();
        let accesses = [
            both,
            keys(TableId(0), 0..4), // the data part alone: in place
            keys(TableId(0), 0..3), // part of it, or in another order: copied
            keys(TableId(0), 0..4).into_iter().rev().collect(),
        ];
        for k in accesses {
            let a = r.acquire(OpKind::LocalAccess { fetch: true }, Arc::from(k));
            r.release(a, OpKind::PostLocalAccess { acquire: a, save: true, discard: false }, "local_access").unwrap();
        }
        r.check().unwrap();
        let p = plan(&r.ops, &tables, 1, 1 << 20).unwrap();
        let in_place: Vec<bool> = p.in_place.iter().step_by(2).map(|x| x.is_some()).collect();
        assert_eq!(in_place, [false, true, false, false]);
        assert_eq!((p.plan.local_in_place, p.plan.local_buffered), (1, 3), "{}", p.plan);
    }

    #[test]
    fn with_two_peaks_to_spare_the_pool_keeps_them_and_pinning_takes_the_rest() {
        let (tables, ops) = setup();
        // Peak without pinning: 4 + 2 rows = 24 B. Budget 56: the pool keeps
        // two of those peaks (48 B) rather than pinning the blobs at the peak
        // to shrink it; one 8 B blob is pinned in what is left.
        let p = plan(&ops, &tables, 1, 56).unwrap();
        assert!(p.plan.double_buffered);
        assert_eq!(p.plan.peak_bytes, 6 * RB);
        assert_eq!(p.plan.pool_bytes, 12 * RB, "{}", p.plan);
        assert_eq!(p.plan.local_device_bytes, 2 * RB);
        assert_eq!(p.plan.pool_bytes + p.plan.local_device_bytes + p.plan.param_device_bytes, 56);
    }

    #[test]
    fn data_at_the_peak_is_pinned_when_that_alone_allows_double_buffering() {
        // A 4-row read held with an 8-row local blob: the peak is 12 rows
        // (48 B), two of them do not fit in 70 B. Pinning the blob (32 B)
        // leaves a 4-row peak, double-buffered in the remaining 38 B.
        let tables = vec![
            TableSpec { name: "p".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 8 },
        ];
        let mut r = Recorder::default();
        let p = r.acquire(OpKind::Read { slack: Slack::BSP }, Arc::from(keys(TableId(0), 0..4)));
        let a = r.acquire(OpKind::LocalAccess { fetch: true }, Arc::from(keys(TableId(1), 0..8)));
        r.release(a, OpKind::PostLocalAccess { acquire: a, save: true, discard: false }, "local_access").unwrap();
        r.release(p, OpKind::PostRead { acquire: p }, "read").unwrap();
        let p = plan(&r.ops, &tables, 1, 70).unwrap();
        assert!(p.plan.double_buffered, "{}", p.plan);
        assert_eq!(p.plan.local_device_bytes, 8 * RB);
        assert_eq!(p.plan.peak_bytes, 4 * RB);
    }

    #[test]
    fn budget_between_one_and_two_peaks_is_single_buffered() {
        let (tables, ops) = setup();
        let p = plan(&ops, &tables, 1, 30).unwrap();
        assert!(!p.plan.double_buffered);
        assert_eq!(p.plan.pool_bytes, 30);
        assert_eq!(p.plan.peak_bytes, 6 * RB);
    }

    #[test]
    fn below_two_peaks_small_local_units_are_pinned_beside_one_and_a_half_peaks() {
        let (tables, ops) = setup();
        // Peak 24 B (a parameter table and its layer's activation); two
        // peaks (48 B) do not fit in 44 B, and paper Algorithm 2 cannot pay
        // for a0 (8 B that leave the peak at 24 B). One and a half peaks can:
        // a0 (8 + 24 + 12 = 44), then a1, which lowers the peak to one
        // parameter table (16 + 16 + 8 = 40).
        let p = plan(&ops, &tables, 1, 44).unwrap();
        assert_eq!(p.plan.local_device_bytes, 4 * RB, "{}", p.plan);
        assert_eq!(p.plan.peak_bytes, 4 * RB);
        assert_eq!(p.plan.pool_bytes, 44 - 4 * RB);
        assert!(!p.plan.double_buffered);
        assert_eq!(p.in_place.iter().filter(|x| x.is_some()).count(), 2);
    }

    #[test]
    fn spare_memory_pins_small_local_units_first() {
        // The peak is a 10-row read alone; a 4-row and then a 2-row local
        // access follow. Two peaks (80 B) leave 16 B: the 2-row unit is pinned
        // before the 4-row one, which then no longer fits.
        let tables = vec![
            TableSpec { name: "p".into(), kind: TableKind::Parameter, rows: 10 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 6 },
        ];
        let mut r = Recorder::default();
        let p = r.acquire(OpKind::Read { slack: Slack::BSP }, Arc::from(keys(TableId(0), 0..10)));
        r.release(p, OpKind::PostRead { acquire: p }, "read").unwrap();
        for rows in [0..4, 4..6] {
            let a = r.acquire(OpKind::LocalAccess { fetch: true }, Arc::from(keys(TableId(1), rows)));
            r.release(a, OpKind::PostLocalAccess { acquire: a, save: true, discard: false }, "local_access").unwrap();
        }
        let p = plan(&r.ops, &tables, 1, 96).unwrap();
        assert!(p.plan.double_buffered);
        assert_eq!(p.plan.local_device_bytes, 2 * RB, "{}", p.plan);
        assert_eq!(p.on_device[1], vec![false, false, false, false, true, true]);
    }

    #[test]
    fn budget_below_one_peak_names_the_bytes_needed() {
        let (tables, ops) = setup();
        match plan(&ops, &tables, 1, 23) {
            Err(Error::BudgetTooSmall { needed: 24, budget: 23, .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    /// Blob A (2 rows) is posted, a read of p (4 rows) is acquired, then A
    /// is read back; the read is released before A's access when
    /// `read_released_first`, after it otherwise.
    fn handover_setup(read_released_first: bool) -> (Vec<TableSpec>, Vec<RecordedOp>) {
        let tables = vec![
            TableSpec { name: "p".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 2 },
        ];
        let mut r = Recorder::default();
        let a_keys: Arc<[RowKey]> = Arc::from(keys(TableId(1), 0..2));
        let a = r.acquire(OpKind::LocalAccess { fetch: false }, a_keys.clone());
        r.release(a, OpKind::PostLocalAccess { acquire: a, save: true, discard: false }, "local_access").unwrap();
        let p = r.acquire(OpKind::Read { slack: Slack::BSP }, Arc::from(keys(TableId(0), 0..4)));
        if read_released_first {
            r.release(p, OpKind::PostRead { acquire: p }, "read").unwrap();
        }
        let b = r.acquire(OpKind::LocalAccess { fetch: true }, a_keys);
        r.release(b, OpKind::PostLocalAccess { acquire: b, save: false, discard: false }, "local_access").unwrap();
        if !read_released_first {
            r.release(p, OpKind::PostRead { acquire: p }, "read").unwrap();
        }
        r.check().unwrap();
        (tables, r.ops)
    }

    #[test]
    fn a_hand_over_is_kept_where_it_holds_no_more_than_its_target_step() {
        // The read is held with A's access: keeping A across the read's
        // acquisition holds 6 rows there, as A's access does anyway.
        let (tables, ops) = handover_setup(false);
        let p = plan(&ops, &tables, 1, 30).unwrap();
        assert_eq!(p.plan.handovers, 1);
        assert_eq!(p.handovers.len(), 1);
        assert_eq!(p.plan.peak_bytes, 6 * RB);
        assert!(!p.plan.double_buffered);
        // Everything fits: A is pinned and served in place, nothing handed over.
        let p = plan(&ops, &tables, 1, 1 << 20).unwrap();
        assert_eq!(p.plan.handovers, 0);
        assert_eq!(p.plan.peak_bytes, 4 * RB);
    }

    #[test]
    fn a_hand_over_that_would_raise_the_peak_is_dropped() {
        // The read alone is the peak (4 rows); A's access holds 2. Keeping A
        // across the read would hold 6 rows: A is saved and fetched instead.
        let (tables, ops) = handover_setup(true);
        let p = plan(&ops, &tables, 1, 30).unwrap();
        assert_eq!(p.plan.handovers, 0);
        assert_eq!(p.plan.peak_bytes, 4 * RB);
    }
}

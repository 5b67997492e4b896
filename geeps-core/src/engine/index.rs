//! The index builder: turns the keys of one access into per-partition row
//! indexes (buffer row ↔ device slot, buffer row ↔ host slot), uploaded to the
//! device once and reused every iteration. Keys are validated here, so the
//! kernels downstream can trust every row they are given.

use std::collections::HashSet;
use std::sync::Arc;

use crate::device::{Device, DevicePtr, IndexId, RowPair};
use crate::engine::accumulators::Accumulators;
use crate::engine::store::{Slot, Stores};
use crate::error::{Error, Result};
use crate::table::{partition_of, RowKey, TableKind, TableSpec};

/// A device-resident index, freed when dropped.
pub(crate) struct DeviceIndex {
    device: Arc<dyn Device>,
    pub(crate) id: IndexId,
}

impl Drop for DeviceIndex {
    fn drop(&mut self) {
        self.device.free_index(self.id);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Param { table: usize, part: usize },
    Local { table: usize },
}

/// The rows of one access that fall in one region.
pub(crate) struct Group {
    pub(crate) target: Target,
    /// (buffer row, device slot) pairs, uploaded to the device.
    pub(crate) device_index: Option<DeviceIndex>,
    /// (buffer row, host slot).
    pub(crate) host_pairs: Vec<RowPair>,
    /// (buffer row, region row): every row of the group, for outgoing deltas.
    pub(crate) region_pairs: Vec<RowPair>,
    /// For a parameter partition whose every row the access lists, in row
    /// order and in consecutive buffer rows: the buffer row of its first.
    pub(crate) whole_from: Option<u32>,
}

/// Everything needed to serve one access without looking at its keys again.
pub(crate) struct AccessPlan {
    pub(crate) rows: usize,
    pub(crate) groups: Vec<Group>,
    /// Distinct tables touched, ascending.
    pub(crate) tables: Vec<usize>,
    /// For a local access served in place: its rows on the device.
    pub(crate) in_place: Option<DevicePtr>,
    /// Recycled buffers for a pre-update whose partitions become outgoing
    /// deltas as they are (see `engine/outgoing.rs`).
    pub(crate) outgoing: Accumulators,
    /// When the keys are consecutive rows of one parameter table, in order:
    /// the table and the first row (a read of them may be served in place).
    pub(crate) run: Option<(usize, u32)>,
}

impl AccessPlan {
    /// Whether some partition's deltas can be taken from this access's
    /// buffer as they are.
    pub(crate) fn covers_a_partition(&self) -> bool {
        self.groups.iter().any(|g| g.whole_from.is_some())
    }
}

/// Checks that `keys` name existing, distinct rows of tables of kind `kind`.
pub(crate) fn validate_keys(tables: &[TableSpec], keys: &[RowKey], kind: TableKind, call: &str) -> Result<()> {
    if keys.is_empty() {
        return Err(Error::InvalidKeys(format!("{call} needs at least one key")));
    }
    let mut seen = HashSet::with_capacity(keys.len());
    for k in keys {
        let Some(spec) = tables.get(k.table.0 as usize) else {
            return Err(Error::UnknownTable { table: k.table.0, declared: tables.len() });
        };
        if k.row >= spec.rows {
            return Err(Error::UnknownRow { key: *k, table_name: spec.name.clone(), rows: spec.rows });
        }
        if spec.kind != kind {
            let want = match kind {
                TableKind::Parameter => "parameter tables (use local_access for local tables)",
                TableKind::Local => "local tables (use read/pre_update for parameter tables)",
            };
            return Err(Error::InvalidKeys(format!("{call} takes keys of {want}; {k} is in table `{}`", spec.name)));
        }
        if !seen.insert(*k) {
            return Err(Error::InvalidKeys(format!("{call} lists {k} twice; each row may appear once per access")));
        }
    }
    Ok(())
}

/// Builds the plan of an access to `keys` (already validated).
pub(crate) fn build(
    device: &Arc<dyn Device>,
    tables: &[TableSpec],
    stores: &Stores,
    num_parts: usize,
    keys: &[RowKey],
    in_place_offset: Option<u32>,
    width: usize,
) -> Result<AccessPlan> {
    // (target, device pairs, host pairs, region pairs)
    type Pending = (Target, Vec<RowPair>, Vec<RowPair>, Vec<RowPair>);
    let mut groups: Vec<Pending> = Vec::new();
    let mut tables_touched: Vec<usize> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let t = k.table.0 as usize;
        if !tables_touched.contains(&t) {
            tables_touched.push(t);
        }
        let (target, layout) = match tables[t].kind {
            TableKind::Parameter => {
                let part = partition_of(tables[t].rows, num_parts, k.row);
                let parts =
                    stores.params[t].as_ref().ok_or(Error::UnknownTable { table: t as u32, declared: tables.len() })?;
                (Target::Param { table: t, part }, &parts[part].layout)
            }
            TableKind::Local => {
                let region =
                    stores.locals[t].as_ref().ok_or(Error::UnknownTable { table: t as u32, declared: tables.len() })?;
                (Target::Local { table: t }, &region.layout)
            }
        };
        let g = match groups.iter().position(|g| g.0 == target) {
            Some(g) => g,
            None => {
                groups.push((target, Vec::new(), Vec::new(), Vec::new()));
                groups.len() - 1
            }
        };
        let region_row = k.row - layout.first_row;
        let buffer_row = i as u32;
        match layout.slot(region_row) {
            Slot::Device(s) => groups[g].1.push(RowPair { buffer_row, store_row: s }),
            Slot::Host(s) => groups[g].2.push(RowPair { buffer_row, store_row: s }),
        }
        groups[g].3.push(RowPair { buffer_row, store_row: region_row });
    }
    tables_touched.sort_unstable();

    let in_place = match in_place_offset {
        Some(offset) => {
            let t = tables_touched[0];
            let region = stores.locals[t].as_ref().and_then(|r| r.device.ptr);
            region.map(|p| p.add_floats(offset as usize * width))
        }
        None => None,
    };

    let mut built = Vec::with_capacity(groups.len());
    for (target, device_pairs, host_pairs, region_pairs) in groups {
        let whole_from = match target {
            Target::Param { table, part } => {
                let rows = stores.params[table].as_ref().map_or(0, |parts| parts[part].layout.rows());
                whole_partition_from(&region_pairs, rows)
            }
            Target::Local { .. } => None,
        };
        let device_index = if device_pairs.is_empty() || in_place.is_some() {
            None
        } else {
            Some(DeviceIndex { device: device.clone(), id: device.upload_index(&device_pairs)? })
        };
        built.push(Group { target, device_index, host_pairs, region_pairs, whole_from });
    }
    Ok(AccessPlan {
        rows: keys.len(),
        groups: built,
        tables: tables_touched,
        in_place,
        outgoing: Accumulators::default(),
        run: run_of(tables, keys),
    })
}

/// The table and first row when `keys` are consecutive rows of one
/// parameter table, in ascending order.
fn run_of(tables: &[TableSpec], keys: &[RowKey]) -> Option<(usize, u32)> {
    let first = keys.first()?;
    let t = first.table.0 as usize;
    let consecutive =
        keys.iter().enumerate().all(|(i, k)| k.table == first.table && k.row as usize == first.row as usize + i);
    (consecutive && tables.get(t)?.kind == TableKind::Parameter).then_some((t, first.row))
}

/// The first buffer row when `pairs` list every one of a region's `rows`
/// rows in order, in consecutive buffer rows.
fn whole_partition_from(pairs: &[RowPair], rows: usize) -> Option<u32> {
    let first = pairs.first()?.buffer_row;
    let whole = pairs.len() == rows
        && pairs
            .iter()
            .enumerate()
            .all(|(i, p)| p.store_row as usize == i && p.buffer_row as usize == first as usize + i);
    whole.then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableId;

    fn tables() -> Vec<TableSpec> {
        vec![
            TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 10 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 3 },
        ]
    }

    #[test]
    fn validation_names_the_problem() {
        let t = tables();
        let k = |table, row| RowKey::new(TableId(table), row);
        assert!(matches!(validate_keys(&t, &[], TableKind::Parameter, "read"), Err(Error::InvalidKeys(_))));
        assert!(matches!(
            validate_keys(&t, &[k(5, 0)], TableKind::Parameter, "read"),
            Err(Error::UnknownTable { table: 5, declared: 2 })
        ));
        assert!(matches!(
            validate_keys(&t, &[k(0, 10)], TableKind::Parameter, "read"),
            Err(Error::UnknownRow { rows: 10, .. })
        ));
        assert!(
            matches!(validate_keys(&t, &[k(1, 0)], TableKind::Parameter, "read"), Err(Error::InvalidKeys(m)) if m.contains("local_access"))
        );
        assert!(
            matches!(validate_keys(&t, &[k(0, 1), k(0, 1)], TableKind::Parameter, "read"), Err(Error::InvalidKeys(m)) if m.contains("twice"))
        );
        validate_keys(&t, &[k(0, 1), k(0, 2)], TableKind::Parameter, "read").unwrap();
    }

    #[test]
    fn runs_are_consecutive_rows_of_one_parameter_table() {
        let t = tables();
        let k = |table, row| RowKey::new(TableId(table), row);
        assert_eq!(run_of(&t, &[k(0, 3), k(0, 4), k(0, 5)]), Some((0, 3)));
        assert_eq!(run_of(&t, &[k(0, 9)]), Some((0, 9)));
        assert_eq!(run_of(&t, &[k(0, 3), k(0, 5)]), None, "a gap");
        assert_eq!(run_of(&t, &[k(0, 4), k(0, 3)]), None, "descending");
        assert_eq!(run_of(&t, &[k(1, 0), k(1, 1)]), None, "a local table");
        assert_eq!(run_of(&t, &[k(0, 9), k(1, 10)]), None, "two tables");
    }
}

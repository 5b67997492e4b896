//! The data model: tables of fixed-width `f32` rows, row keys, staleness bounds
//! and how a table's rows split into partitions. Pure data; no storage here.

use std::fmt;
use std::ops::Range;

/// Identifies a table of one instance; tables are numbered in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The address of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// The table.
    pub table: TableId,
    /// The row within it.
    pub row: u32,
}

impl RowKey {
    /// Row `row` of `table`.
    pub fn new(table: TableId, row: u32) -> Self {
        RowKey { table, row }
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(table {}, row {})", self.table.0, self.row)
    }
}

/// Builds the keys of rows `rows` of `table`.
pub fn keys(table: TableId, rows: Range<u32>) -> Vec<RowKey> {
    rows.map(|row| RowKey { table, row }).collect()
}

/// Whether a table is shared through the keepers or private to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableKind {
    /// Shared rows; updates are additive and travel to the keepers.
    Parameter,
    /// A worker's private rows (inputs, activations, momentum); never sent.
    Local,
}

/// A declared table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableSpec {
    /// The name it was declared with (unique in the instance).
    pub name: String,
    /// Parameter or local.
    pub kind: TableKind,
    /// Number of rows.
    pub rows: u32,
}

/// How stale a read may be, in clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slack {
    /// At most this many clocks behind; `Bounded(0)` is BSP.
    Bounded(u32),
    /// Never wait for freshness (asynchronous).
    Unbounded,
}

impl Slack {
    /// Bulk synchronous parallel: see every update of every earlier clock.
    pub const BSP: Slack = Slack::Bounded(0);

    /// The data age a read at `clock` must see, or `None` if it never waits.
    pub fn required_age(self, clock: u64) -> Option<u64> {
        match self {
            Slack::Bounded(s) => Some(clock.saturating_sub(u64::from(s))),
            Slack::Unbounded => None,
        }
    }
}

/// Row range of partition `part` when `rows` rows split into `parts` partitions.
/// Contiguous and balanced: sizes differ by at most one row.
pub(crate) fn partition_range(rows: u32, parts: usize, part: usize) -> Range<u32> {
    let rows = u64::from(rows);
    let parts = parts as u64;
    let part = part as u64;
    let start = rows * part / parts;
    let end = rows * (part + 1) / parts;
    start as u32..end as u32
}

/// Partition holding `row` (inverse of [`partition_range`]).
pub(crate) fn partition_of(rows: u32, parts: usize, row: u32) -> usize {
    // The largest p with start(p) <= row; start(p) = floor(rows * p / parts).
    let rows64 = u64::from(rows);
    let parts64 = parts as u64;
    let mut p = ((u64::from(row) * parts64 + parts64 - 1) / rows64.max(1)) as usize;
    p = p.min(parts - 1);
    while partition_range(rows, parts, p).start > row {
        p -= 1;
    }
    while partition_range(rows, parts, p).end <= row {
        p += 1;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn partitions_cover_rows_exactly_once(rows in 1u32..5000, parts in 1usize..17) {
            let mut next = 0;
            for p in 0..parts {
                let r = partition_range(rows, parts, p);
                prop_assert_eq!(r.start, next);
                next = r.end;
                for row in r.clone() {
                    prop_assert_eq!(partition_of(rows, parts, row), p);
                }
            }
            prop_assert_eq!(next, rows);
        }
    }

    #[test]
    fn slack_required_age() {
        assert_eq!(Slack::BSP.required_age(5), Some(5));
        assert_eq!(Slack::Bounded(2).required_age(5), Some(3));
        assert_eq!(Slack::Bounded(9).required_age(5), Some(0));
        assert_eq!(Slack::Unbounded.required_age(5), None);
    }
}

//! Table-wide landing buffers for publications. A transport that is handed a
//! `Landing` asks it, before reading a publication's payload, for a slot at
//! the partition's offset in a buffer as long as the whole table, and reads
//! the payload straight into it. When every partition of a table has landed
//! in one buffer, a read of consecutive rows across partitions is served
//! from that buffer in place: no gather into a read buffer.
//!
//! A buffer is reused only when nothing but the landing holds it (no kept
//! publication, no read, no slot being written), so what a reader sees never
//! changes under it; BSP needs two per table (the one read, the one filling).
//! It owns the buffers and which partitions landed where; it never reads a
//! socket and never decides what a read is served from.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::table::{partition_range, TableKind, TableSpec};

/// Buffers per table at most; beyond them publications are read as before.
const MAX_BUFFERS: usize = 3;

/// Where publications of a worker's tables land (see the module doc). Cheap
/// to clone; every clone is the same landing.
#[derive(Clone)]
pub struct Landing {
    inner: Arc<Inner>,
}

struct Inner {
    width: usize,
    parts: usize,
    /// Per table id: its buffers, `None` for tables that do not land.
    tables: Vec<Option<TableLanding>>,
}

struct TableLanding {
    rows: u32,
    buffers: Mutex<Vec<Entry>>,
}

struct Entry {
    buffer: Arc<Buffer>,
    /// The data age the buffer is filling at.
    age: u64,
    /// Per partition: a slot was handed out at `age`.
    landed: Vec<bool>,
}

/// One table-long allocation of floats.
struct Buffer {
    ptr: *mut f32,
    floats: usize,
}

// SAFETY: the allocation is plain floats; every byte is written only through
// a slot, which has its range to itself (see `Landing::slot`), and read only
// through the `Bytes` a slot becomes.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Buffer {
    fn zeroed(floats: usize) -> Buffer {
        let boxed: Box<[f32]> = vec![0.0f32; floats].into_boxed_slice();
        Buffer { ptr: Box::into_raw(boxed).cast::<f32>(), floats }
    }

    fn contains(&self, bytes: &[u8]) -> bool {
        let start = self.ptr as usize;
        let at = bytes.as_ptr() as usize;
        at >= start && at + bytes.len() <= start + self.floats * 4
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `floats` are those of the boxed slice made in `zeroed`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.floats)) });
    }
}

/// A partition's range of a landing buffer, to be filled with the payload
/// of one publication and then handed on as its rows (`into_bytes`).
pub struct LandingSlot {
    buffer: Arc<Buffer>,
    /// Byte range inside the buffer.
    range: Range<usize>,
}

impl LandingSlot {
    /// The slot's bytes, to read the payload into (zeroes or an older
    /// publication's bytes until then).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the range lies inside the buffer, and no other slot or
        // `Bytes` covers it while this slot lives (see `Landing::slot`).
        unsafe { std::slice::from_raw_parts_mut(self.buffer.ptr.cast::<u8>().add(self.range.start), self.range.len()) }
    }

    /// The filled slot as a publication's rows, without copying.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for LandingSlot {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: as in `bytes_mut`; once the slot is `Bytes` nobody writes it.
        unsafe { std::slice::from_raw_parts(self.buffer.ptr.cast::<u8>().add(self.range.start), self.range.len()) }
    }
}

impl Landing {
    /// A landing for every parameter table of `tables`, each split into
    /// `parts` partitions (keeper shards) of rows `width` floats wide (the
    /// instance makes its own; this one is for testing a transport).
    pub fn new(tables: &[TableSpec], parts: usize, width: usize) -> Landing {
        let lands: Vec<bool> = tables.iter().map(|t| t.kind == TableKind::Parameter).collect();
        Landing::for_tables(tables, &lands, parts, width)
    }

    /// A landing for the tables whose entry in `lands` is true.
    pub(crate) fn for_tables(tables: &[TableSpec], lands: &[bool], parts: usize, width: usize) -> Landing {
        let tables = tables
            .iter()
            .zip(lands)
            .map(|(spec, &on)| on.then(|| TableLanding { rows: spec.rows, buffers: Mutex::new(Vec::new()) }))
            .collect();
        Landing { inner: Arc::new(Inner { width, parts, tables }) }
    }

    fn byte_range(&self, t: &TableLanding, partition: usize) -> Range<usize> {
        let rows = partition_range(t.rows, self.inner.parts, partition);
        let row_bytes = self.inner.width * 4;
        rows.start as usize * row_bytes..rows.end as usize * row_bytes
    }

    fn table(&self, table: u32, partition: u32) -> Option<&TableLanding> {
        let t = self.inner.tables.get(table as usize)?.as_ref()?;
        ((partition as usize) < self.inner.parts).then_some(t)
    }

    /// A slot for the publication of `partition` of `table` at data age
    /// `age`, whose payload is `bytes` long; `None` when the table does not
    /// land, the length is not the partition's, or every buffer is held.
    pub fn slot(&self, table: u32, partition: u32, age: u64, bytes: usize) -> Option<LandingSlot> {
        let t = self.table(table, partition)?;
        let part = partition as usize;
        let range = self.byte_range(t, part);
        if range.len() != bytes {
            return None;
        }
        let mut buffers = t.buffers.lock();
        let parts = self.inner.parts;
        let at = match buffers.iter().position(|e| e.age == age && !e.landed[part]) {
            Some(filling) => filling,
            None => {
                // Free: only the landing holds it (counts only grow by cloning
                // a holder, and every holder but the landing's is gone).
                let i = match buffers.iter().position(|e| Arc::strong_count(&e.buffer) == 1) {
                    Some(free) => free,
                    None if buffers.len() < MAX_BUFFERS => {
                        let buffer = Arc::new(Buffer::zeroed(t.rows as usize * self.inner.width));
                        buffers.push(Entry { buffer, age, landed: Vec::new() });
                        buffers.len() - 1
                    }
                    None => return None,
                };
                buffers[i].age = age;
                buffers[i].landed = vec![false; parts];
                i
            }
        };
        let entry = &mut buffers[at];
        entry.landed[part] = true;
        Some(LandingSlot { buffer: entry.buffer.clone(), range })
    }

    /// `rows` copied into a slot (for publications that did not arrive
    /// through one: a keeper in this process); `None` as for `slot`.
    pub(crate) fn copy_in(&self, table: u32, partition: u32, age: u64, rows: &[u8]) -> Option<Bytes> {
        let mut slot = self.slot(table, partition, age, rows.len())?;
        slot.bytes_mut().copy_from_slice(rows);
        Some(slot.into_bytes())
    }

    /// Whether the table's publications land here.
    pub(crate) fn lands(&self, table: usize) -> bool {
        self.inner.tables.get(table).is_some_and(|t| t.is_some())
    }

    /// Whether `pubs`, the rows of consecutive partitions from `first`,
    /// lie in one buffer, each at its partition's offset: then they are one
    /// run of the table's rows in memory.
    pub(crate) fn contiguous(&self, table: usize, first: usize, pubs: &[&[u8]]) -> bool {
        let Some(t) = self.inner.tables.get(table).and_then(|t| t.as_ref()) else { return false };
        let buffers = t.buffers.lock();
        let Some(home) = pubs.first().and_then(|b| buffers.iter().find(|e| e.buffer.contains(b))) else {
            return false;
        };
        let base = home.buffer.ptr as usize;
        pubs.iter().enumerate().all(|(i, b)| {
            let range = self.byte_range(t, first + i);
            b.as_ptr() as usize == base + range.start && b.len() == range.len()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn landing() -> Landing {
        let tables = vec![
            TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 10 },
            TableSpec { name: "b".into(), kind: TableKind::Parameter, rows: 3 },
        ];
        Landing::for_tables(&tables, &[true, false], 2, 2)
    }

    fn filled(l: &Landing, part: u32, age: u64, value: u8) -> Bytes {
        let mut s = l.slot(0, part, age, 40).expect("a slot");
        s.bytes_mut().fill(value);
        s.into_bytes()
    }

    #[test]
    fn partitions_of_one_age_land_side_by_side() {
        let l = landing();
        let (a, b) = (filled(&l, 0, 1, 1), filled(&l, 1, 1, 2));
        assert_eq!(b.as_ptr() as usize, a.as_ptr() as usize + 40);
        assert!(l.contiguous(0, 0, &[&a, &b]));
        assert!(!l.contiguous(0, 1, &[&a]), "at partition 0's offset, not 1's");
        assert!(a.iter().all(|&x| x == 1) && b.iter().all(|&x| x == 2));
        // Wrong length, unknown partition, a table that does not land: no slot.
        assert!(l.slot(0, 0, 2, 36).is_none());
        assert!(l.slot(0, 2, 2, 40).is_none());
        assert!(l.slot(1, 0, 2, 24).is_none() && !l.lands(1) && l.lands(0));
        // Rows from elsewhere are not contiguous with anything.
        let other = Bytes::from(vec![0u8; 40]);
        assert!(!l.contiguous(0, 0, &[&other, &b]));
    }

    #[test]
    fn held_buffers_are_never_rewritten() {
        let l = landing();
        let age1 = [filled(&l, 0, 1, 1), filled(&l, 1, 1, 1)];
        // Age 2 fills another buffer while age 1 is held.
        let age2 = [filled(&l, 0, 2, 2), filled(&l, 1, 2, 2)];
        assert!(!l.contiguous(0, 0, &[&age1[0], &age2[1]]));
        assert!(age1.iter().all(|b| b.iter().all(|&x| x == 1)));
        // Partition 0 at age 3 while partition 1 of age 1 is still held: a third buffer.
        let p0_age3 = filled(&l, 0, 3, 3);
        assert!(age1.iter().chain(&age2).all(|b| !b.as_ptr_range().contains(&p0_age3.as_ptr())));
        // All three held: no fourth; the transport reads into its own buffer.
        assert!(l.slot(0, 1, 4, 40).is_none());
        drop(age1);
        // Age 1 given up: its buffer serves age 4.
        let p1_age4 = filled(&l, 1, 4, 4);
        assert!(age2.iter().all(|b| b.iter().all(|&x| x == 2)) && p0_age3.iter().all(|&x| x == 3));
        assert!(p1_age4.iter().all(|&x| x == 4));
        // A second slot for a partition that already landed at an age goes elsewhere.
        drop(age2);
        let again = filled(&l, 1, 4, 5);
        assert_ne!(again.as_ptr(), p1_age4.as_ptr());
        assert!(p1_age4.iter().all(|&x| x == 4));
    }

    #[test]
    fn copied_rows_land_too() {
        let l = landing();
        let a = l.copy_in(0, 0, 7, &[9u8; 40]).expect("lands");
        let b = filled(&l, 1, 7, 3);
        assert!(l.contiguous(0, 0, &[&a, &b]) && a.iter().all(|&x| x == 9));
    }
}

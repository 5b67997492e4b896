//! Keeper logic: one shard's storage of parameter rows (host memory), a vector
//! clock per table, additive apply in a fixed order (`apply_order.rs`: the
//! same bits whatever order batches arrive in), and publication when a data
//! age advances.
//! Transport-agnostic: the in-process transport and geeps-net both host it.
//! It must never block, spawn threads or know how messages travel.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::keeper::apply_order::{ApplyOrder, Deltas};
use crate::keeper::rows::KeeperRows;
use crate::keeper::vector_clock::VectorClock;
use crate::table::{partition_range, TableKind, TableSpec};
use crate::transport::bytes::bytes_from_shared;
use crate::transport::delta_encoding::DeltaEncoding;
use crate::transport::delta_encoding::{add_all, check_deltas};
use crate::transport::landing::Landing;
use crate::transport::messages::{Publish, UpdateBatch};

struct ShardTable {
    /// Floats of this shard's partition (rows × width); empty for local tables.
    /// Shared with the publications still being sent: the next apply copies
    /// only if one of them is still held (copy on write), so publishing never
    /// copies the partition.
    data: KeeperRows,
    /// The rows before the last copy on write, reused for the next one once
    /// no publication holds them: a keeper publishing every clock alternates
    /// between two buffers instead of allocating (and faulting in) one per clock.
    spare: Option<KeeperRows>,
    clock: VectorClock,
    parameter: bool,
    /// Which batch goes in next; holds those that came early.
    order: ApplyOrder,
    /// Batches whose turn came, ticked in the clock but not yet added: they
    /// go in together (one pass over the rows) when the age advances or
    /// [`GROUP`] of them wait, so no publication ever lacks one.
    pending: Vec<Deltas>,
    /// The table as of its data age (taken when the age last advanced):
    /// what a worker joining late, or reading now, must get — never the
    /// batches of the next clock that went in since.
    at_age: Publish,
}

/// A table's rows and clocks as they are now; the rows shared, not copied
/// (the next apply copies them while a publication holds them).
fn publication_of(t: &ShardTable, table: u32, partition: u32) -> Publish {
    Publish { table, partition, age: t.clock.min(), included: t.clock.entries().to_vec(), rows: t.data.to_bytes() }
}

/// Batches added in one pass at most (before the age advances): more save
/// memory traffic (the rows cross once for all of them), fewer leave less
/// to add after the clock's last batch came.
const GROUP: usize = 2;

fn views(deltas: &[Deltas]) -> Vec<(&[u8], DeltaEncoding)> {
    deltas.iter().map(|(b, e)| (&b[..], *e)).collect()
}

/// Where a table's next rows are written (see [`add_pending`]).
struct Destination<'a> {
    landing: Option<&'a Landing>,
    table: u32,
    partition: u32,
    /// The data age the rows will most likely be published at (the landing
    /// groups partitions by it; a wrong guess costs the worker a gather).
    age: u64,
}

/// Adds the table's pending batches to its rows, in their turn's order, in
/// one pass over the rows however many there are. While a publication still
/// holds the rows, the sum is written to other rows in the same pass (old
/// rows + deltas), never copied first and added after: into the landing of
/// this process's worker where there is one with room, else a spare.
fn add_pending(t: &mut ShardTable, to: Destination) {
    if t.pending.is_empty() {
        return;
    }
    let pending = std::mem::take(&mut t.pending);
    let views = views(&pending);
    if let Some(rows) = t.data.get_mut() {
        return add_all(rows, None, &views);
    }
    let len = t.data.len();
    // A slot is the partition's length or none at all (`Landing::slot`).
    let mut landed =
        to.landing.and_then(|l| l.slot(to.table, to.partition, to.age, len * 4)).and_then(KeeperRows::landed);
    match landed.as_mut().and_then(KeeperRows::get_mut) {
        Some(written) => add_all(written, Some(t.data.floats()), &views),
        None => landed = None,
    }
    let next = landed.unwrap_or_else(|| {
        let spare = t.spare.take().and_then(KeeperRows::into_owned).filter(|v| v.len() == len);
        let mut rows = spare.unwrap_or_else(|| vec![0.0; len]);
        add_all(&mut rows, Some(t.data.floats()), &views);
        KeeperRows::Owned(Arc::new(rows))
    });
    let before = std::mem::replace(&mut t.data, next);
    // Rows in the landing need no spare of the keeper's own (the landing recycles its buffers).
    if matches!(t.data, KeeperRows::Landed(_)) {
        t.spare = None;
    } else if matches!(before, KeeperRows::Owned(_)) {
        t.spare = Some(before);
    }
}

/// How many clocks of every worker's batches a table may hold for the
/// deterministic order before it applies on arrival: BSP never holds more
/// than one, SSP with slack 1 two.
const HELD_CLOCKS: usize = 2;

/// The rows and clocks one keeper shard owns: partition `shard` of every
/// parameter table.
pub struct KeeperShard {
    shard: usize,
    row_width: usize,
    tables: Vec<ShardTable>,
    /// The landing of the worker in this process, if it has one: new rows
    /// are written there (see [`KeeperShard::publish_into`]).
    landing: Option<Landing>,
}

impl KeeperShard {
    /// Shard `shard` of `num_shards`, for `num_workers` workers and the cluster's tables.
    pub fn new(shard: usize, num_shards: usize, num_workers: usize, row_width: usize, tables: &[TableSpec]) -> Self {
        let tables = tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let parameter = t.kind == TableKind::Parameter;
                let rows = if parameter { partition_range(t.rows, num_shards, shard).len() } else { 0 };
                let limit = HELD_CLOCKS * num_workers * rows * row_width * 4;
                let data = KeeperRows::zeros(rows * row_width);
                let clock = VectorClock::new(num_workers);
                let at_age = Publish {
                    table: i as u32,
                    partition: shard as u32,
                    age: clock.min(),
                    included: clock.entries().to_vec(),
                    rows: data.to_bytes(),
                };
                ShardTable {
                    data,
                    spare: None,
                    clock,
                    parameter,
                    order: ApplyOrder::new(num_workers, limit),
                    pending: Vec::new(),
                    at_age,
                }
            })
            .collect();
        KeeperShard { shard, row_width, tables, landing: None }
    }

    /// Writes the rows of later publications into `landing`, the landing of
    /// the worker in this same process (partition `shard` of each table at
    /// the age it is published at), so that worker reads this shard's rows
    /// where the keeper left them instead of copying each publication into
    /// its landing. The rows are the same bits; a landing with no room left
    /// (or a table that does not land) leaves them in the keeper's own memory.
    pub fn publish_into(&mut self, landing: Landing) {
        self.landing = Some(landing);
    }

    fn table_mut(&mut self, table: u32, partition: u32) -> Result<&mut ShardTable> {
        if partition as usize != self.shard {
            return Err(Error::InvalidKeys(format!("partition {partition} sent to keeper shard {}", self.shard)));
        }
        let count = self.tables.len();
        match self.tables.get_mut(table as usize) {
            Some(t) if t.parameter => Ok(t),
            Some(_) => {
                Err(Error::InvalidKeys(format!("table {table} is a local table; keepers hold parameter tables only")))
            }
            None => Err(Error::UnknownTable { table, declared: count }),
        }
    }

    /// Takes a batch: it goes in when its turn comes (clock-major,
    /// rank-minor), at once if it is next. Returns the publication if the
    /// table's data age advanced. A rejected batch changes nothing.
    pub fn apply(&mut self, batch: &UpdateBatch) -> Result<Option<Publish>> {
        self.apply_many(std::slice::from_ref(batch)).pop().unwrap_or(Ok(None))
    }

    /// Takes several batches at once (those that came while the keeper was
    /// busy), as [`apply`](Self::apply) would one after another, with the
    /// same bits: the batches whose turn has come go into each table's rows
    /// in one pass instead of one pass each. One result per batch: a
    /// refused batch's error (it changes nothing), and each table's
    /// publication, if its age advanced, with the last batch accepted for it.
    pub fn apply_many(&mut self, batches: &[UpdateBatch]) -> Vec<Result<Option<Publish>>> {
        let mut results: Vec<Result<Option<Publish>>> = batches.iter().map(|b| self.arrive(b).map(|()| None)).collect();
        let mut applied: Vec<u32> = Vec::new();
        for (batch, result) in batches.iter().zip(results.iter_mut()).rev() {
            if result.is_ok() && !applied.contains(&batch.table) {
                applied.push(batch.table);
                *result = self.apply_in_turn(batch.table);
            }
        }
        results
    }

    /// Checks a batch and holds it for its turn; a refused one changes nothing.
    fn arrive(&mut self, batch: &UpdateBatch) -> Result<()> {
        let shard = self.shard;
        let t = self.table_mut(batch.table, batch.partition)?;
        let worker = batch.worker as usize;
        if worker >= t.clock.entries().len() {
            return Err(Error::InvalidKeys(format!(
                "update from worker {worker}, but the cluster has {}",
                t.clock.entries().len()
            )));
        }
        if let Some(deltas) = &batch.deltas {
            check_deltas(deltas, batch.encoding, t.data.len()).map_err(|e| match e {
                Error::Mismatch(m) => {
                    Error::Mismatch(format!("table {} partition {}: {m}", batch.table, batch.partition))
                }
                other => other,
            })?;
        }
        let deltas = batch.deltas.clone().map(|bytes| (bytes, batch.encoding));
        t.order.arrive(worker, batch.clock, deltas).map_err(|e| match e {
            Error::Mismatch(m) => Error::Mismatch(format!("keeper {shard}, table {}: {m}", batch.table)),
            other => other,
        })
    }

    /// Applies every held batch of `table` whose turn has come. Returns the
    /// publication if the data age advanced, taken once the batches that
    /// were waiting for that moment went in. Under BSP no batch of the new
    /// age's clock can exist yet (a worker updates at clock `c` only after
    /// reading age `c`), so it holds exactly the clocks below the age.
    fn apply_in_turn(&mut self, table: u32) -> Result<Option<Publish>> {
        let shard = self.shard as u32;
        let landing = self.landing.as_ref();
        let t = &mut self.tables[table as usize];
        let mut advanced = false;
        let mut ticked = Ok(());
        loop {
            // Each worker that may still send (or has batches held) is next at its clock.
            let candidates: Vec<(u64, usize)> = (0..t.clock.entries().len())
                .filter(|&w| !t.clock.is_departed(w) || t.order.holds_from(w))
                .map(|w| (t.clock.entries()[w], w))
                .collect();
            let Some((clock, worker, deltas)) = t.order.next(candidates.into_iter()) else { break };
            t.pending.extend(deltas);
            match t.clock.tick(worker, clock) {
                Ok(age) => advanced |= age.is_some(),
                Err(e) => {
                    ticked = Err(e);
                    break;
                }
            }
        }
        if advanced || ticked.is_err() || t.pending.len() >= GROUP {
            // Rows written before the age advances are published at the next age at the earliest.
            let age = t.clock.min() + u64::from(!advanced);
            add_pending(t, Destination { landing, table, partition: shard, age });
        }
        ticked?;
        if !advanced {
            return Ok(None);
        }
        t.at_age = publication_of(t, table, shard);
        Ok(Some(t.at_age.clone()))
    }

    /// Marks a worker as departed in every table; returns the publications of
    /// tables whose age advanced.
    pub fn depart(&mut self, worker: usize) -> Vec<Publish> {
        let shard = self.shard as u32;
        let mut out = Vec::new();
        for i in 0..self.tables.len() as u32 {
            let t = &mut self.tables[i as usize];
            if !t.parameter {
                continue;
            }
            // The age may advance at the departure itself (taken before the
            // next clock's held batches go in) and again as they do.
            let mut latest = None;
            if t.clock.depart(worker).is_some() {
                let to = Destination { landing: self.landing.as_ref(), table: i, partition: shard, age: t.clock.min() };
                add_pending(t, to);
                t.at_age = publication_of(t, i, shard);
                latest = Some(t.at_age.clone());
            }
            if let Ok(Some(p)) = self.apply_in_turn(i) {
                latest = Some(p);
            }
            out.extend(latest);
        }
        out
    }

    /// A table's partition as of its data age: the rows with every batch
    /// of the clocks below the age, and nothing of later clocks.
    pub fn publication(&self, table: u32) -> Publish {
        self.tables[table as usize].at_age.clone()
    }

    /// Publications of every parameter table (for a worker that just joined).
    pub fn all_publications(&self) -> Vec<Publish> {
        (0..self.tables.len() as u32)
            .filter(|&i| self.tables[i as usize].parameter)
            .map(|i| self.publication(i))
            .collect()
    }

    /// The worker holding back a table's age, and its clock.
    pub fn slowest(&self, table: u32) -> Option<(usize, u64)> {
        self.tables.get(table as usize).and_then(|t| t.clock.slowest())
    }

    /// Every worker's clock of a table as this shard has received it
    /// (batches applied or held for their turn; `None` for a table it does
    /// not know).
    pub fn worker_clocks(&self, table: u32) -> Option<Vec<u64>> {
        self.tables.get(table as usize).map(|t| t.order.arrived().to_vec())
    }

    /// Floats per row.
    pub fn row_width(&self) -> usize {
        self.row_width
    }

    /// Dense rows of a table's partition (for checkpoints and tests), with
    /// every batch whose turn has come, including those waiting to go in
    /// with the next ones (added into a copy here).
    pub fn rows(&self, table: u32) -> Option<Bytes> {
        let t = self.tables.get(table as usize).filter(|t| t.parameter)?;
        if t.pending.is_empty() {
            return Some(t.data.to_bytes());
        }
        let mut rows = vec![0.0; t.data.len()];
        add_all(&mut rows, Some(t.data.floats()), &views(&t.pending));
        Some(bytes_from_shared(Arc::new(rows)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::bytes::{bytes_from_floats, floats_from_bytes};

    fn specs() -> Vec<TableSpec> {
        vec![
            TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 4 },
        ]
    }

    fn batch(worker: u32, clock: u64, deltas: Option<Vec<f32>>) -> UpdateBatch {
        UpdateBatch {
            table: 0,
            partition: 0,
            worker,
            clock,
            deltas: deltas.map(|d| bytes_from_floats(&d)),
            encoding: DeltaEncoding::F32,
        }
    }

    #[test]
    fn copies_on_write_alternate_between_two_buffers_and_held_publications_keep_their_rows() {
        let mut k = KeeperShard::new(0, 1, 1, 2, &specs());
        let values = |p: &Publish| {
            let mut v = [0.0; 8];
            floats_from_bytes(&p.rows, &mut v).unwrap();
            v
        };
        let first = k.apply(&batch(0, 0, Some(vec![1.0; 8]))).unwrap().unwrap();
        let first_ptr = first.rows.as_ptr();
        assert_eq!(values(&first), [1.0; 8]);
        drop(first);
        // Clock 1 writes to another buffer: the table's publication holds clock 0's.
        let second = k.apply(&batch(0, 1, Some(vec![2.0; 8]))).unwrap().unwrap();
        assert_ne!(second.rows.as_ptr(), first_ptr);
        drop(second);
        // Clock 0's buffer is free again: clock 2 goes back to it.
        let third = k.apply(&batch(0, 2, Some(vec![4.0; 8]))).unwrap().unwrap();
        assert_eq!(third.rows.as_ptr(), first_ptr, "the spare buffer is reused");
        assert_eq!(values(&third), [7.0; 8]);
        // A publication still held is never written to: the next clock takes a new buffer.
        let fourth = k.apply(&batch(0, 3, Some(vec![8.0; 8]))).unwrap().unwrap();
        let fifth = k.apply(&batch(0, 4, Some(vec![16.0; 8]))).unwrap().unwrap();
        assert_eq!((values(&third), values(&fourth), values(&fifth)), ([7.0; 8], [15.0; 8], [31.0; 8]));
        assert_ne!(fifth.rows.as_ptr(), third.rows.as_ptr());
        // A malformed batch on the copy-on-write path changes nothing.
        let held = k.publication(0);
        let bad = UpdateBatch { deltas: Some(Bytes::from_static(&[0; 12])), ..batch(0, 5, None) };
        assert!(k.apply(&bad).is_err());
        assert_eq!(values(&held), [31.0; 8]);
        assert_eq!(values(&k.apply(&batch(0, 5, Some(vec![1.0; 8]))).unwrap().unwrap()), [32.0; 8]);
    }

    #[test]
    fn applies_additively_and_publishes_on_age_advance() {
        let mut k = KeeperShard::new(0, 2, 2, 1, &specs());
        // Shard 0 of 2 owns rows 0..2 of the 4-row table.
        assert!(k.apply(&batch(0, 0, Some(vec![1.0, 2.0]))).unwrap().is_none());
        let p = k.apply(&batch(1, 0, Some(vec![10.0, 20.0]))).unwrap().unwrap();
        assert_eq!(p.age, 1);
        assert_eq!(p.included, vec![1, 1]);
        let mut rows = [0.0; 2];
        floats_from_bytes(&p.rows, &mut rows).unwrap();
        assert_eq!(rows, [11.0, 22.0]);
    }

    #[test]
    fn a_held_publication_is_a_snapshot() {
        let mut k = KeeperShard::new(0, 1, 1, 2, &specs());
        let first = k.apply(&batch(0, 0, Some(vec![1.0; 8]))).unwrap().unwrap();
        // Still held (as by a socket writer) while the next clock is applied.
        let second = k.apply(&batch(0, 1, Some(vec![2.0; 8]))).unwrap().unwrap();
        let (mut a, mut b) = ([0.0; 8], [0.0; 8]);
        floats_from_bytes(&first.rows, &mut a).unwrap();
        floats_from_bytes(&second.rows, &mut b).unwrap();
        assert_eq!((a, b), ([1.0; 8], [3.0; 8]));
        drop((first, second));
        // Nothing held: applied in place, and still right.
        let third = k.apply(&batch(0, 2, Some(vec![1.0; 8]))).unwrap().unwrap();
        floats_from_bytes(&third.rows, &mut a).unwrap();
        assert_eq!(a, [4.0; 8]);
    }

    #[test]
    fn bad_batches_are_rejected_and_change_nothing() {
        let mut k = KeeperShard::new(0, 1, 2, 2, &specs());
        let before = k.rows(0).unwrap();
        let wrong_len = UpdateBatch { deltas: Some(Bytes::from_static(&[1, 2, 3])), ..batch(0, 0, None) };
        assert!(k.apply(&wrong_len).is_err());
        assert!(k.apply(&batch(0, 5, Some(vec![0.0; 8]))).is_err());
        assert!(k.apply(&batch(7, 0, None)).is_err());
        assert!(k.apply(&UpdateBatch { table: 1, ..batch(0, 0, None) }).is_err());
        assert!(k.apply(&UpdateBatch { table: 9, ..batch(0, 0, None) }).is_err());
        assert!(k.apply(&UpdateBatch { partition: 1, ..batch(0, 0, None) }).is_err());
        assert_eq!(k.rows(0).unwrap(), before);
        // The worker's clock did not move: clock 0 is still accepted.
        k.apply(&batch(0, 0, None)).unwrap();
    }

    /// Values whose sums depend on the order they are added in: per row, one
    /// worker adds a large value, one a small one and one the large value's
    /// negative.
    fn awkward(worker: u32, clock: u64, len: usize) -> Vec<f32> {
        let big = 1e8 * (1.0 + clock as f32 * 0.01);
        (0..len)
            .map(|i| match (worker as usize + i) % 3 {
                0 => big,
                1 => 1.0 + clock as f32 * 0.25 + i as f32,
                _ => -big,
            })
            .collect()
    }

    /// Applies every worker's `clocks` batches to shard `shard` of 2,
    /// interleaved as `picks` says (each pick names a worker; its next batch
    /// arrives unless it would run more than a clock ahead), the rest in rank
    /// order; returns the final rows' bits and every publication's age.
    fn run(shard: u32, workers: u32, clocks: u64, picks: &[u32]) -> (Vec<u32>, Vec<u64>) {
        let mut k = KeeperShard::new(shard as usize, 2, workers as usize, 2, &specs());
        let mut next = vec![0u64; workers as usize];
        let mut ages = Vec::new();
        let mut send = |k: &mut KeeperShard, w: u32, next: &mut Vec<u64>| {
            let c = next[w as usize];
            // At most one clock ahead of the slowest (SSP with slack 1; BSP is tighter).
            let slowest = next.iter().copied().min().unwrap_or(0);
            if c < clocks && c <= slowest + 1 {
                next[w as usize] += 1;
                let b = UpdateBatch { partition: shard, ..batch(w, c, Some(awkward(w, c, 4))) };
                if let Some(p) = k.apply(&b).unwrap() {
                    ages.push(p.age);
                }
            }
        };
        for &w in picks {
            send(&mut k, w % workers, &mut next);
        }
        while next.iter().any(|&c| c < clocks) {
            for w in 0..workers {
                send(&mut k, w, &mut next);
            }
        }
        let mut rows = [0.0f32; 4];
        floats_from_bytes(&k.rows(0).unwrap(), &mut rows).unwrap();
        (rows.iter().map(|v| v.to_bits()).collect(), ages)
    }

    proptest::proptest! {
        #[test]
        fn any_arrival_order_gives_the_same_bits(
            shard in 0u32..2,
            picks in proptest::collection::vec(0u32..3, 0..24),
        ) {
            // Rank order, clock by clock, is the reference.
            let reference = run(shard, 3, 4, &[0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
            proptest::prop_assert_eq!(run(shard, 3, 4, &picks), reference);
        }
    }

    #[test]
    fn arrival_order_would_change_the_bits() {
        // The property above is not vacuous: adding in another order differs.
        let (a, b, c) = (awkward(0, 0, 8), awkward(1, 0, 8), awkward(2, 0, 8));
        let sum = |x: &[f32], y: &[f32], z: &[f32]| -> Vec<u32> {
            (0..8).map(|i| ((0.0 + x[i]) + y[i] + z[i]).to_bits()).collect()
        };
        assert_ne!(sum(&a, &b, &c), sum(&c, &b, &a));
    }

    #[test]
    fn early_batches_are_held_until_their_turn() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        // Worker 1's clock 0 comes first: held, nothing applied.
        assert!(k.apply(&batch(1, 0, Some(vec![2.0; 4]))).unwrap().is_none());
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[0.0; 4]));
        assert_eq!(k.tables[0].order.held(), (1, 16));
        // Worker 0's arrives: both go in, rank 0 first, and the age advances.
        let p = k.apply(&batch(0, 0, Some(vec![1.0; 4]))).unwrap().unwrap();
        assert_eq!((p.age, k.tables[0].order.held()), (1, (0, 0)));
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[3.0; 4]));
        // A duplicate is still refused at arrival.
        assert!(k.apply(&batch(1, 0, None)).is_err());
    }

    #[test]
    fn a_late_joiner_gets_the_table_as_of_its_age() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        k.apply(&batch(0, 0, Some(vec![1.0; 4]))).unwrap();
        k.apply(&batch(1, 0, Some(vec![2.0; 4]))).unwrap();
        // Worker 0 writes clock 1 without reading (no read waits for it):
        // applied, but the age is still 1.
        assert!(k.apply(&batch(0, 1, Some(vec![100.0; 4]))).unwrap().is_none());
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[103.0; 4]));
        // What a worker joining now gets is the table at age 1, not part of clock 1.
        let p = &k.all_publications()[0];
        assert_eq!((p.age, p.included.clone()), (1, vec![1, 1]));
        assert_eq!(p.rows, bytes_from_floats(&[3.0; 4]));
    }

    #[test]
    fn workers_too_far_apart_fall_back_to_arrival_order() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        // Worker 0 runs far ahead (asynchronous training): more than the
        // held clocks' worth waits, so the table applies on arrival.
        for c in 0..(HELD_CLOCKS as u64 * 2 + 2) {
            k.apply(&batch(0, c, Some(vec![1.0; 4]))).unwrap();
        }
        assert!(!k.tables[0].order.is_ordered());
        assert_eq!(k.tables[0].order.held(), (0, 0));
        assert_eq!(k.worker_clocks(0).unwrap(), vec![HELD_CLOCKS as u64 * 2 + 2, 0]);
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[(HELD_CLOCKS * 2 + 2) as f32; 4]));
        // Worker 1 still counts.
        let p = k.apply(&batch(1, 0, Some(vec![0.5; 4]))).unwrap().unwrap();
        assert_eq!(p.age, 1);
    }

    #[test]
    fn a_departed_workers_held_batches_still_go_in() {
        let mut k = KeeperShard::new(0, 1, 3, 1, &specs());
        k.apply(&batch(2, 0, Some(vec![4.0; 4]))).unwrap();
        k.apply(&batch(2, 1, Some(vec![4.0; 4]))).unwrap();
        // Worker 2 leaves with both batches held behind workers 0 and 1.
        assert!(k.depart(2).is_empty());
        k.apply(&batch(0, 0, Some(vec![1.0; 4]))).unwrap();
        let p = k.apply(&batch(1, 0, Some(vec![2.0; 4]))).unwrap().unwrap();
        assert_eq!(p.age, 1);
        // Clock 1 of worker 2 waits for workers 0 and 1's clock 1.
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[7.0; 4]));
        k.apply(&batch(0, 1, None)).unwrap();
        k.apply(&batch(1, 1, None)).unwrap();
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[11.0; 4]));
        assert_eq!(k.tables[0].order.held(), (0, 0));
    }

    #[test]
    fn departure_releases_waiting_workers() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        k.apply(&batch(0, 0, None)).unwrap();
        let pubs = k.depart(1);
        assert_eq!(pubs.len(), 1);
        assert_eq!(pubs[0].age, 1);
    }

    #[test]
    fn batches_in_turn_go_in_together_and_every_publication_has_them() {
        let mut k = KeeperShard::new(0, 1, 4, 1, &specs());
        // The first batch in turn waits for a second to go in with it.
        assert!(k.apply(&batch(0, 0, Some(vec![1.0; 4]))).unwrap().is_none());
        assert_eq!(k.tables[0].pending.len(), 1);
        assert_eq!(k.tables[0].data.floats(), [0.0; 4]);
        // Read back, the rows have it all the same.
        assert_eq!(k.rows(0).unwrap(), bytes_from_floats(&[1.0; 4]));
        k.apply(&batch(1, 0, Some(vec![2.0; 4]))).unwrap();
        assert!(k.tables[0].pending.is_empty());
        assert_eq!(k.tables[0].data.floats(), [3.0; 4]);
        // Several at once: the early ones are held, then all go in when their turn comes.
        let results = k.apply_many(&[
            batch(3, 0, Some(vec![8.0; 4])),
            batch(1, 1, Some(vec![100.0; 4])),
            batch(2, 0, Some(vec![4.0; 4])),
            batch(2, 0, None),
        ]);
        assert!(results[0].as_ref().unwrap().is_none());
        assert!(results[3].is_err(), "a duplicate is refused, the rest stand");
        // The age advanced: its publication goes with the last batch accepted,
        // and holds clock 0 only (worker 1's clock 1 waits for worker 0's).
        let p = results[2].as_ref().unwrap().as_ref().unwrap();
        assert_eq!((p.age, p.included.clone()), (1, vec![1, 1, 1, 1]));
        assert_eq!(p.rows, bytes_from_floats(&[15.0; 4]));
        assert_eq!(k.tables[0].order.held(), (1, 16));
    }

    #[test]
    fn rows_written_into_the_worker_landing_have_the_same_bits_and_fall_back_when_it_is_full() {
        let specs = specs();
        let landing = crate::transport::landing::Landing::new(&specs, 2, 1);
        let (mut plain, mut landed) = (KeeperShard::new(1, 2, 2, 1, &specs), KeeperShard::new(1, 2, 2, 1, &specs));
        landed.publish_into(landing.clone());
        let at = |worker: u32, clock: u64, d: f32| UpdateBatch {
            partition: 1,
            ..batch(worker, clock, Some(vec![d / 3.0, -d / 7.0]))
        };
        let mut held = Vec::new();
        let mut in_place = Vec::new();
        for clock in 0..8u64 {
            let mut last = (None, None);
            for worker in 0..2 {
                let b = at(worker, clock, (clock * 2 + u64::from(worker) + 1) as f32);
                last = (plain.apply(&b).unwrap(), landed.apply(&b).unwrap());
            }
            let (Some(p), Some(l)) = last else { panic!("clock {clock}: the age did not advance") };
            assert_eq!((l.age, &l.rows), (p.age, &p.rows), "clock {clock}: the same publication");
            assert_eq!(landed.rows(0).unwrap(), p.rows);
            in_place.push(landing.contiguous(0, 1, &[&l.rows]));
            // The publications of clocks 2, 3 and 4 are kept: the landing's buffers run out.
            if (2..5).contains(&clock) {
                held.push(l);
            }
            if clock == 5 {
                held.clear();
            }
        }
        // Clock 4 takes the third buffer; with the rows of clocks 2, 3 and 4
        // held, clock 5 finds none and stays in the keeper's memory; the
        // landing has room again from clock 6.
        assert_eq!(in_place, [true, true, true, true, true, false, true, true]);
    }

    #[test]
    fn a_departure_that_advances_the_age_publishes_the_batches_waiting_to_go_in() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        assert!(k.apply(&batch(0, 0, Some(vec![1.5; 4]))).unwrap().is_none());
        assert_eq!(k.tables[0].pending.len(), 1);
        let pubs = k.depart(1);
        assert_eq!(pubs.len(), 1);
        assert_eq!((pubs[0].age, pubs[0].rows.clone()), (1, bytes_from_floats(&[1.5; 4])));
    }
}

//! Keeper logic: one shard's storage of parameter rows (host memory), a vector
//! clock per table, additive apply, and publication when a data age advances.
//! Transport-agnostic: the in-process transport and geeps-net both host it.
//! It must never block, spawn threads or know how messages travel.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::table::{partition_range, TableKind, TableSpec};
use crate::transport::{add_bytes, bytes_from_shared, check_payload, Publish, UpdateBatch};
use crate::vector_clock::VectorClock;

struct ShardTable {
    /// Floats of this shard's partition (rows × width); empty for local tables.
    /// Shared with the publications still being sent: the next apply copies
    /// only if one of them is still held (copy on write), so publishing never
    /// copies the partition.
    data: Arc<Vec<f32>>,
    clock: VectorClock,
    parameter: bool,
}

/// The rows and clocks one keeper shard owns: partition `shard` of every
/// parameter table.
pub struct KeeperShard {
    shard: usize,
    row_width: usize,
    tables: Vec<ShardTable>,
}

impl KeeperShard {
    /// Shard `shard` of `num_shards`, for `num_workers` workers and the cluster's tables.
    pub fn new(shard: usize, num_shards: usize, num_workers: usize, row_width: usize, tables: &[TableSpec]) -> Self {
        let tables = tables
            .iter()
            .map(|t| {
                let parameter = t.kind == TableKind::Parameter;
                let rows = if parameter { partition_range(t.rows, num_shards, shard).len() } else { 0 };
                ShardTable {
                    data: Arc::new(vec![0.0; rows * row_width]),
                    clock: VectorClock::new(num_workers),
                    parameter,
                }
            })
            .collect();
        KeeperShard { shard, row_width, tables }
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

    /// Applies a batch. Returns the publication if the table's data age
    /// advanced. A rejected batch changes nothing.
    pub fn apply(&mut self, batch: &UpdateBatch) -> Result<Option<Publish>> {
        let shard = self.shard;
        let t = self.table_mut(batch.table, batch.partition)?;
        let worker = batch.worker as usize;
        if worker >= t.clock.entries().len() {
            return Err(Error::InvalidKeys(format!(
                "update from worker {worker}, but the cluster has {}",
                t.clock.entries().len()
            )));
        }
        if t.clock.entries()[worker] != batch.clock {
            return Err(Error::Mismatch(format!(
                "keeper {shard}: worker {worker} sent clock {} of table {}, expected {}",
                batch.clock,
                batch.table,
                t.clock.entries()[worker]
            )));
        }
        if let Some(deltas) = &batch.deltas {
            // Checked before `make_mut`: a bad batch changes (and copies) nothing.
            check_payload(deltas, t.data.len())?;
            add_bytes(Arc::make_mut(&mut t.data).as_mut_slice(), deltas)?;
        }
        let t = self.table_mut(batch.table, batch.partition)?;
        let advanced = t.clock.tick(worker, batch.clock)?;
        Ok(advanced.map(|_| self.publication(batch.table)))
    }

    /// Marks a worker as departed in every table; returns the publications of
    /// tables whose age advanced.
    pub fn depart(&mut self, worker: usize) -> Vec<Publish> {
        let advanced: Vec<u32> = (0..self.tables.len() as u32)
            .filter(|&i| {
                let t = &mut self.tables[i as usize];
                t.parameter && t.clock.depart(worker).is_some()
            })
            .collect();
        advanced.into_iter().map(|i| self.publication(i)).collect()
    }

    /// The current rows and age of a table's partition.
    pub fn publication(&self, table: u32) -> Publish {
        let t = &self.tables[table as usize];
        Publish {
            table,
            partition: self.shard as u32,
            age: t.clock.min(),
            included: t.clock.entries().to_vec(),
            rows: bytes_from_shared(t.data.clone()),
        }
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

    /// Every worker's clock of a table as this shard has counted it
    /// (`None` for a table it does not know).
    pub fn worker_clocks(&self, table: u32) -> Option<Vec<u64>> {
        self.tables.get(table as usize).map(|t| t.clock.entries().to_vec())
    }

    /// Floats per row.
    pub fn row_width(&self) -> usize {
        self.row_width
    }

    /// Dense rows of a table's partition (for checkpoints and tests).
    pub fn rows(&self, table: u32) -> Option<Bytes> {
        self.tables.get(table as usize).filter(|t| t.parameter).map(|t| bytes_from_shared(t.data.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{bytes_from_floats, floats_from_bytes};

    fn specs() -> Vec<TableSpec> {
        vec![
            TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 4 },
            TableSpec { name: "act".into(), kind: TableKind::Local, rows: 4 },
        ]
    }

    fn batch(worker: u32, clock: u64, deltas: Option<Vec<f32>>) -> UpdateBatch {
        UpdateBatch { table: 0, partition: 0, worker, clock, deltas: deltas.map(|d| bytes_from_floats(&d)) }
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

    #[test]
    fn departure_releases_waiting_workers() {
        let mut k = KeeperShard::new(0, 1, 2, 1, &specs());
        k.apply(&batch(0, 0, None)).unwrap();
        let pubs = k.depart(1);
        assert_eq!(pubs.len(), 1);
        assert_eq!(pubs[0].age, 1);
    }
}

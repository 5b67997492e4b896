//! The partitions one keeper owns: with `stripes` S over `world` ranks a
//! table splits into S·world partitions and keeper k owns k, k+world, …,
//! k+(S−1)·world, each a core keeper shard of its own. Workers send a
//! clock's partitions in order, so each keeper receives its stripes one
//! after another and publishes the first while the later ones still
//! arrive: the wire carries publications and updates at once instead of
//! one after the other. This file routes batches to stripes and gathers
//! their answers; it never applies a batch itself.

use geeps_core::keeper::KeeperShard;
use geeps_core::transport::{Landing, Publish, UpdateBatch};
use geeps_core::{Error, Result, TableSpec};

pub(crate) struct Stripes {
    shard: usize,
    world: usize,
    keepers: Vec<KeeperShard>,
}

impl Stripes {
    /// Keeper `shard`'s partitions of `tables`, `stripes` of them, for `world` workers.
    pub(crate) fn new(shard: usize, world: usize, stripes: usize, row_width: usize, tables: &[TableSpec]) -> Self {
        let parts = world * stripes;
        let keepers =
            (0..stripes).map(|j| KeeperShard::new(shard + j * world, parts, world, row_width, tables)).collect();
        Stripes { shard, world, keepers }
    }

    /// The stripe holding `partition`, or why this keeper has none.
    fn stripe_of(&self, partition: u32) -> Result<usize> {
        let p = partition as usize;
        if p % self.world != self.shard || p / self.world >= self.keepers.len() {
            return Err(Error::InvalidKeys(format!(
                "partition {partition} sent to keeper {}, which owns partitions {}; give every rank the same GEEPS_STRIPES",
                self.shard,
                (0..self.keepers.len()).map(|j| (self.shard + j * self.world).to_string()).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(p / self.world)
    }

    /// [`KeeperShard::apply_many`] across the stripes: one result per batch, in order.
    pub(crate) fn apply_many(&mut self, batches: &[UpdateBatch]) -> Vec<Result<Option<Publish>>> {
        if let [only] = &mut self.keepers[..] {
            return only.apply_many(batches);
        }
        let mut results: Vec<Result<Option<Publish>>> = Vec::with_capacity(batches.len());
        let mut by_stripe: Vec<Vec<usize>> = vec![Vec::new(); self.keepers.len()];
        for (i, b) in batches.iter().enumerate() {
            match self.stripe_of(b.partition) {
                Ok(j) => {
                    by_stripe[j].push(i);
                    results.push(Ok(None));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        for (j, indexes) in by_stripe.iter().enumerate().filter(|(_, ix)| !ix.is_empty()) {
            let mine: Vec<UpdateBatch> = indexes.iter().map(|&i| batches[i].clone()).collect();
            for (&i, r) in indexes.iter().zip(self.keepers[j].apply_many(&mine)) {
                results[i] = r;
            }
        }
        results
    }

    /// [`KeeperShard::depart`] on every stripe.
    pub(crate) fn depart(&mut self, worker: usize) -> Vec<Publish> {
        self.keepers.iter_mut().flat_map(|k| k.depart(worker)).collect()
    }

    /// Every stripe's publications of every parameter table.
    pub(crate) fn all_publications(&self) -> Vec<Publish> {
        self.keepers.iter().flat_map(KeeperShard::all_publications).collect()
    }

    /// Every worker's clock of a table as all stripes have received it (the
    /// least over the stripes).
    pub(crate) fn worker_clocks(&self, table: u32) -> Option<Vec<u64>> {
        let mut each = self.keepers.iter().map(|k| k.worker_clocks(table));
        let first = each.next()??;
        each.try_fold(first, |least, c| Some(least.iter().zip(c?).map(|(a, b)| (*a).min(b)).collect()))
    }

    /// [`KeeperShard::publish_into`] for every stripe.
    pub(crate) fn publish_into(&mut self, landing: Landing) {
        for k in &mut self.keepers {
            k.publish_into(landing.clone());
        }
    }

    /// The one stripe's shard (tests that look inside a keeper of one stripe).
    #[cfg(test)]
    pub(crate) fn only(&self) -> &KeeperShard {
        assert_eq!(self.keepers.len(), 1, "only() on a keeper of {} stripes", self.keepers.len());
        &self.keepers[0]
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use geeps_core::transport::DeltaEncoding;
    use geeps_core::TableKind;

    use super::*;

    fn batch(partition: u32, worker: u32, rows: usize) -> UpdateBatch {
        UpdateBatch {
            table: 0,
            partition,
            worker,
            clock: 0,
            deltas: Some(Bytes::from(vec![0u8; rows * 4])),
            encoding: DeltaEncoding::F32,
        }
    }

    #[test]
    fn each_stripe_publishes_when_its_own_batches_are_in() {
        // 2 ranks, 3 stripes, 60 rows: 6 partitions of 10; keeper 1 owns 1, 3 and 5.
        let spec = TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 60 };
        let mut s = Stripes::new(1, 2, 3, 1, &[spec]);
        let r = s.apply_many(&[batch(1, 0, 10), batch(3, 0, 10), batch(1, 1, 10)]);
        let published: Vec<Option<u32>> = r.into_iter().map(|r| r.unwrap().map(|p| p.partition)).collect();
        assert_eq!(published, vec![None, None, Some(1)], "partition 1 had both workers' batches, 3 only one");
        let r = s.apply_many(&[batch(3, 1, 10)]);
        assert_eq!(r[0].as_ref().unwrap().as_ref().map(|p| p.partition), Some(3));
        assert_eq!(s.worker_clocks(0), Some(vec![0, 0]), "stripe 5 has received nothing yet");
        assert_eq!(s.all_publications().iter().map(|p| p.partition).collect::<Vec<_>>(), vec![1, 3, 5]);
    }

    #[test]
    fn a_partition_of_another_keeper_is_refused_by_name() {
        let spec = TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 60 };
        let mut s = Stripes::new(1, 2, 3, 1, &[spec]);
        for wrong in [2, 7] {
            let e = s.apply_many(&[batch(wrong, 0, 10)]).pop().unwrap().unwrap_err().to_string();
            assert!(e.contains(&format!("partition {wrong} sent to keeper 1, which owns partitions 1, 3, 5")), "{e}");
            assert!(e.contains("GEEPS_STRIPES"), "{e}");
        }
    }
}

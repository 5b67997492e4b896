//! A vector clock: one entry per worker, counting the clocks it has ended on a
//! table. Its minimum is the table's data age on a keeper shard. Workers that
//! left the cluster no longer hold the minimum back.

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorClock {
    entries: Vec<u64>,
    departed: Vec<bool>,
}

impl VectorClock {
    pub fn new(workers: usize) -> Self {
        VectorClock { entries: vec![0; workers], departed: vec![false; workers] }
    }

    pub fn entries(&self) -> &[u64] {
        &self.entries
    }

    /// The data age: the smallest entry among workers still present; when all
    /// have left, the largest entry.
    pub fn min(&self) -> u64 {
        let present = self.entries.iter().zip(&self.departed).filter(|(_, d)| !**d).map(|(e, _)| *e).min();
        present.unwrap_or_else(|| self.entries.iter().copied().max().unwrap_or(0))
    }

    /// Records that `worker` ended clock `clock`; clocks must arrive in order,
    /// so a duplicate or a gap is an error and changes nothing. Returns the new
    /// minimum if it advanced.
    pub fn tick(&mut self, worker: usize, clock: u64) -> Result<Option<u64>> {
        let Some(entry) = self.entries.get(worker).copied() else {
            return Err(Error::InvalidKeys(format!("worker {worker} is not one of {} workers", self.entries.len())));
        };
        if clock != entry {
            return Err(Error::Mismatch(format!(
                "worker {worker} ended clock {clock} but its next clock is {entry} (duplicate or lost update batch)"
            )));
        }
        let before = self.min();
        self.entries[worker] = entry + 1;
        let after = self.min();
        Ok((after > before).then_some(after))
    }

    /// Marks `worker` as gone; returns the new minimum if it advanced.
    pub fn depart(&mut self, worker: usize) -> Option<u64> {
        let before = self.min();
        if let Some(d) = self.departed.get_mut(worker) {
            *d = true;
        }
        let after = self.min();
        (after > before).then_some(after)
    }

    /// Whether `worker` left the cluster.
    pub fn is_departed(&self, worker: usize) -> bool {
        self.departed.get(worker).copied().unwrap_or(true)
    }

    /// The worker holding the minimum back (for "who is behind" diagnostics).
    pub fn slowest(&self) -> Option<(usize, u64)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(w, _)| !self.departed[*w])
            .min_by_key(|(_, e)| **e)
            .map(|(w, e)| (w, *e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_advances_when_the_slowest_ticks() {
        let mut vc = VectorClock::new(3);
        assert_eq!(vc.tick(0, 0).unwrap(), None);
        assert_eq!(vc.tick(1, 0).unwrap(), None);
        assert_eq!(vc.slowest(), Some((2, 0)));
        assert_eq!(vc.tick(2, 0).unwrap(), Some(1));
        assert_eq!(vc.min(), 1);
    }

    #[test]
    fn duplicates_and_gaps_are_rejected_without_effect() {
        let mut vc = VectorClock::new(2);
        vc.tick(0, 0).unwrap();
        assert!(matches!(vc.tick(0, 0), Err(Error::Mismatch(_))));
        assert!(matches!(vc.tick(1, 3), Err(Error::Mismatch(_))));
        assert!(vc.tick(5, 0).is_err());
        assert_eq!(vc.entries(), &[1, 0]);
    }

    #[test]
    fn departed_workers_do_not_hold_the_age() {
        let mut vc = VectorClock::new(2);
        vc.tick(0, 0).unwrap();
        vc.tick(0, 1).unwrap();
        assert_eq!(vc.depart(1), Some(2));
        vc.depart(0);
        assert_eq!(vc.min(), 2);
    }
}

//! The shadow of one allocation or page-locked block: for each byte range,
//! the operation that last wrote it and, per stream, the last one that read
//! it since. Checking an access finds an earlier conflicting access (at
//! least one of the two a write) that does not happen before it. Must never
//! hold byte contents, and never merge ranges whose histories differ.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::clock::{Epoch, Stamp};

/// One recorded access: when, and what it was (for the report).
#[derive(Debug, Clone)]
pub struct Access {
    pub epoch: Epoch,
    pub what: Arc<str>,
}

/// An earlier access that races with the one checked, on `start..end`.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub earlier: Access,
    pub earlier_wrote: bool,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone)]
struct Seg {
    end: u64,
    write: Option<Access>,
    reads: Vec<Access>,
}

impl Seg {
    fn fresh(end: u64, write: bool, access: &Access) -> Seg {
        if write {
            Seg { end, write: Some(access.clone()), reads: Vec::new() }
        } else {
            Seg { end, write: None, reads: vec![access.clone()] }
        }
    }

    fn add_read(&mut self, access: &Access) {
        match self.reads.iter_mut().find(|r| r.epoch.lane == access.epoch.lane) {
            Some(r) => *r = access.clone(),
            None => self.reads.push(access.clone()),
        }
    }
}

/// Byte ranges (offsets from the resource's start) and their last accesses.
#[derive(Debug, Default)]
pub struct Shadow {
    segs: BTreeMap<u64, Seg>,
}

impl Shadow {
    /// Segments overlapping `start..end`, by start.
    fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, &Seg)> {
        let mut hits: Vec<(u64, &Seg)> =
            self.segs.range(..end).rev().take_while(|(_, s)| s.end > start).map(|(&k, s)| (k, s)).collect();
        hits.reverse();
        hits
    }

    /// The first earlier access to `start..end` that conflicts with an access
    /// (a write if `write`) stamped `stamp` and does not happen before it.
    pub fn check(&self, start: u64, end: u64, write: bool, stamp: &Stamp) -> Option<Conflict> {
        for (s, seg) in self.overlapping(start, end) {
            let range = (s.max(start), seg.end.min(end));
            if let Some(w) = seg.write.as_ref().filter(|w| !stamp.clock.covers(w.epoch)) {
                return Some(Conflict { earlier: w.clone(), earlier_wrote: true, start: range.0, end: range.1 });
            }
            if write {
                if let Some(r) = seg.reads.iter().find(|r| !stamp.clock.covers(r.epoch)) {
                    return Some(Conflict { earlier: r.clone(), earlier_wrote: false, start: range.0, end: range.1 });
                }
            }
        }
        None
    }

    /// Records the access: a write replaces the range's history, a read joins it.
    pub fn record(&mut self, start: u64, end: u64, write: bool, access: &Access) {
        if start >= end {
            return;
        }
        let keys: Vec<u64> = self.overlapping(start, end).iter().map(|(k, _)| *k).collect();
        let mut cursor = start;
        for k in keys {
            let Some(seg) = self.segs.remove(&k) else { continue };
            if k < start {
                self.segs.insert(k, Seg { end: start, ..seg.clone() });
            }
            if seg.end > end {
                self.segs.insert(end, Seg { end: seg.end, ..seg.clone() });
            }
            if write {
                continue;
            }
            let (from, to) = (k.max(start), seg.end.min(end));
            if cursor < from {
                self.segs.insert(cursor, Seg::fresh(from, false, access));
            }
            let mut middle = Seg { end: to, ..seg };
            middle.add_read(access);
            self.segs.insert(from, middle);
            cursor = to;
        }
        if write {
            self.segs.insert(start, Seg::fresh(end, true, access));
        } else if cursor < end {
            self.segs.insert(cursor, Seg::fresh(end, false, access));
        }
    }

    /// Every recorded access.
    #[cfg(test)]
    pub fn accesses(&self) -> impl Iterator<Item = &Access> {
        self.segs.values().flat_map(|s| s.write.iter().chain(&s.reads))
    }
}

#[cfg(test)]
mod tests {
    use super::super::clock::Clock;
    use super::*;

    fn stamp(lane: usize, tick: u64, knows: &[(usize, u64)]) -> (Stamp, Access) {
        let mut clock = Clock::default();
        clock.set(lane, tick);
        for &(l, t) in knows {
            clock.set(l, t);
        }
        let epoch = Epoch { lane, tick };
        (Stamp { epoch, clock: Arc::new(clock) }, Access { epoch, what: format!("op {lane}.{tick}").into() })
    }

    #[test]
    fn unordered_write_after_write_on_overlapping_bytes_conflicts() {
        let mut sh = Shadow::default();
        let (_, a) = stamp(0, 1, &[]);
        sh.record(0, 100, true, &a);
        let (b, _) = stamp(1, 1, &[]);
        let c = sh.check(50, 150, true, &b).expect("a race");
        assert_eq!((c.start, c.end, c.earlier_wrote), (50, 100, true));
        assert!(sh.check(100, 200, true, &b).is_none(), "disjoint bytes never race");
        let (ordered, _) = stamp(1, 1, &[(0, 1)]);
        assert!(sh.check(0, 100, true, &ordered).is_none(), "an ordering edge clears it");
    }

    #[test]
    fn reads_race_only_with_writes() {
        let mut sh = Shadow::default();
        let (_, r0) = stamp(0, 1, &[]);
        sh.record(0, 64, false, &r0);
        let (r1s, r1) = stamp(1, 1, &[]);
        assert!(sh.check(0, 64, false, &r1s).is_none());
        sh.record(32, 96, false, &r1);
        let (w2, _) = stamp(2, 1, &[(0, 1)]);
        let c = sh.check(0, 96, true, &w2).expect("lane 1's read is unordered");
        assert_eq!((c.start, c.end, c.earlier.epoch.lane), (32, 64, 1));
        let (w2, a2) = stamp(2, 1, &[(0, 1), (1, 1)]);
        assert!(sh.check(0, 96, true, &w2).is_none());
        sh.record(0, 96, true, &a2);
        assert_eq!(sh.accesses().count(), 1, "a write replaces the history of its range");
    }
}

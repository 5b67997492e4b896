//! bf16 publications: a keeper sends each publication of a partition as
//! the bf16 change since the rows its workers last got, and the worker adds
//! that change to its copy. Both sides hold the same f32 copy of what was
//! sent (the keeper its `SentRows`, each worker one per keeper connection)
//! and update it with the same f32 additions, so they never drift apart;
//! the keeper's own rows stay exact, and what rounding held back is part of
//! the next change (error feedback). This module owns the two copies'
//! arithmetic; it never decides which peers get bf16, and never touches
//! update deltas (`bf16`).

use std::collections::HashMap;

use bytes::Bytes;

use crate::wire::bf16::to_bf16;

/// The f32 values of little-endian `bytes` (a whole number of floats).
fn floats_of(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

/// bf16 bits widened to the f32 they stand for.
#[inline(always)]
fn widen(q: u16) -> f32 {
    f32::from_bits(u32::from(q) << 16)
}

/// What a keeper's remote workers hold of each of its partitions (table,
/// partition): the rows of the last f32 base plus every bf16 change sent
/// since.
#[derive(Default)]
pub(crate) struct SentRows {
    by_partition: HashMap<(u32, u32), Vec<f32>>,
}

/// What a keeper sends for one publication.
pub(crate) enum Encoded {
    /// The change since what the workers hold, as bf16 (little-endian).
    Change(Bytes),
    /// The rows themselves, as the new base: a change would not carry them
    /// (a value or its change is not finite, or the length changed).
    Base,
}

impl SentRows {
    /// The rows a worker joining now must get as its base for a
    /// partition whose rows are `rows`: what the others hold (the rows
    /// themselves until the first change goes out).
    pub(crate) fn base_for(&mut self, (table, partition): (u32, u32), rows: &Bytes) -> Bytes {
        match self.by_partition.get(&(table, partition)) {
            Some(held) if held.len() * 4 == rows.len() => held.iter().flat_map(|v| v.to_le_bytes()).collect(),
            _ => {
                self.by_partition.insert((table, partition), floats_of(rows).collect());
                rows.clone()
            }
        }
    }

    /// Encodes `rows` (little-endian f32, the keeper's exact partition) as
    /// the bf16 change since what the workers hold, and updates that copy
    /// as the workers will. Falls back to a new base (the copy then equals
    /// `rows`) where a change cannot carry them.
    pub(crate) fn encode(&mut self, partition: (u32, u32), rows: &[u8]) -> Encoded {
        let n = rows.len() / 4;
        let held = self.by_partition.entry(partition).or_insert_with(|| vec![0.0; n]);
        let finite = held.len() == n && floats_of(rows).all(f32::is_finite) && held.iter().all(|v| v.is_finite());
        if !finite {
            *held = floats_of(rows).collect();
            return Encoded::Base;
        }
        let mut out = vec![0u8; 2 * n];
        for ((v, h), o) in floats_of(rows).zip(held.iter_mut()).zip(out.chunks_exact_mut(2)) {
            let q = to_bf16(v - *h);
            *h += widen(q);
            o.copy_from_slice(&q.to_le_bytes());
        }
        Encoded::Change(Bytes::from(out))
    }
}

/// A worker's copy of what one keeper sent, per (table, partition).
#[derive(Default)]
pub(crate) struct ReceivedRows {
    by_partition: HashMap<(u32, u32), Vec<f32>>,
}

impl ReceivedRows {
    /// Keeps f32 `rows` as the base later bf16 changes of this partition add to.
    pub(crate) fn set_base(&mut self, table: u32, partition: u32, rows: &[u8]) {
        let copy = self.by_partition.entry((table, partition)).or_default();
        copy.clear();
        copy.extend(floats_of(rows));
    }

    /// Adds a bf16 change (little-endian) to the partition's copy and
    /// writes the result into `out` (little-endian f32, the partition's
    /// length in bytes). An error says what the keeper sent wrong.
    pub(crate) fn apply(&mut self, table: u32, partition: u32, change: &[u8], out: &mut [u8]) -> Result<(), String> {
        let Some(copy) = self.by_partition.get_mut(&(table, partition)) else {
            return Err(format!("bf16 change to table {table} partition {partition} before any f32 rows to add it to"));
        };
        if change.len() != 2 * copy.len() || out.len() != 4 * copy.len() {
            return Err(format!(
                "bf16 change of {} bytes to table {table} partition {partition}, whose rows hold {} floats",
                change.len(),
                copy.len()
            ));
        }
        for ((q, h), o) in change.chunks_exact(2).zip(copy.iter_mut()).zip(out.chunks_exact_mut(4)) {
            *h += widen(u16::from_le_bytes([q[0], q[1]]));
            o.copy_from_slice(&h.to_le_bytes());
        }
        Ok(())
    }

    /// Bytes of f32 rows of the partition's copy, if it has one.
    pub(crate) fn len_bytes(&self, table: u32, partition: u32) -> Option<usize> {
        self.by_partition.get(&(table, partition)).map(|c| c.len() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[f32]) -> Bytes {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        floats_of(b).collect()
    }

    /// A keeper and a worker through `clocks` publications of slowly moving rows.
    #[test]
    fn the_worker_holds_what_the_keeper_sent_and_trails_it_by_one_rounding() {
        let n = 4096;
        let (mut sent, mut received) = (SentRows::default(), ReceivedRows::default());
        let mut rows: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let base = sent.base_for((0, 3), &bytes(&vec![0.0; n]));
        received.set_base(0, 3, &base);
        let mut out = vec![0u8; 4 * n];
        for clock in 0..50 {
            for (i, v) in rows.iter_mut().enumerate() {
                *v += 1e-3 * ((i + clock) as f32 * 0.11).cos();
            }
            let Encoded::Change(q) = sent.encode((0, 3), &bytes(&rows)) else { panic!("finite rows sent as a base") };
            assert_eq!(q.len(), 2 * n, "half the bytes of f32");
            received.apply(0, 3, &q, &mut out).unwrap();
            let got = floats(&out);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                sent.by_partition[&(0, 3)].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "clock {clock}: the worker's copy and the keeper's record differ"
            );
            if clock > 0 {
                // After the first clock only the last change's rounding is missing.
                for (g, r) in got.iter().zip(&rows) {
                    assert!((g - r).abs() <= 2e-3 * 2f32.powi(-8) + 1e-9, "clock {clock}: {g} vs {r}");
                }
            }
        }
    }

    #[test]
    fn a_joining_worker_gets_what_the_others_hold() {
        let mut sent = SentRows::default();
        let rows = bytes(&[1.0, 1.0 + 2f32.powi(-12), -3.0]);
        let _ = sent.base_for((5, 1), &bytes(&[0.0; 3]));
        let Encoded::Change(_) = sent.encode((5, 1), &rows) else { panic!() };
        // 1 + 2^-12 is not a bf16: the others hold 1.0, and so must the newcomer.
        assert_eq!(floats(&sent.base_for((5, 1), &rows)), vec![1.0, 1.0, -3.0]);
        // Another partition of the same table has its own record.
        assert_eq!(floats(&sent.base_for((5, 3), &rows)), floats(&rows));
    }

    #[test]
    fn non_finite_rows_go_as_a_base_and_the_copy_recovers() {
        let mut sent = SentRows::default();
        let _ = sent.base_for((0, 0), &bytes(&[0.0, 0.0]));
        assert!(matches!(sent.encode((0, 0), &bytes(&[f32::NAN, 1.0])), Encoded::Base));
        assert!(sent.by_partition[&(0, 0)][0].is_nan());
        // Finite again: the NaN in the copy forces one more base, then changes resume.
        assert!(matches!(sent.encode((0, 0), &bytes(&[2.0, 1.0])), Encoded::Base));
        assert!(matches!(sent.encode((0, 0), &bytes(&[2.5, 1.0])), Encoded::Change(_)));
    }

    #[test]
    fn a_change_without_a_base_or_of_the_wrong_length_is_refused() {
        let mut received = ReceivedRows::default();
        let mut out = vec![0u8; 8];
        let e = received.apply(1, 2, &[0; 4], &mut out).unwrap_err();
        assert!(e.contains("before any f32 rows"), "{e}");
        received.set_base(1, 2, &bytes(&[1.0, 2.0]));
        let e = received.apply(1, 2, &[0; 6], &mut out).unwrap_err();
        assert!(e.contains("bf16 change of 6 bytes to table 1 partition 2, whose rows hold 2 floats"), "{e}");
        assert_eq!(received.len_bytes(1, 2), Some(8));
    }
}

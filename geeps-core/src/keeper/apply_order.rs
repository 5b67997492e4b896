//! The order in which a keeper shard applies one table's update batches:
//! clock-major, rank-minor — the batch of (clock c, worker w) goes in only
//! after every batch of an earlier clock, and of clock c from a lower rank —
//! so a table's float sums, and every publication, come out bit for bit the
//! same whatever order the batches arrive in. Batches that arrive before
//! their turn are held. Under BSP at most one clock of batches is ever held;
//! looser consistency can run further ahead, and past a bound the table
//! falls back to applying on arrival (logged once: bitwise reproducibility
//! is then lost, never correctness). It owns arrival validation and the
//! held batches; it must never touch the rows.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::transport::delta_encoding::DeltaEncoding;

/// A batch's deltas as held: bytes and their layout.
pub(crate) type Deltas = (Bytes, DeltaEncoding);

/// Batches of one table held until their turn, by (clock, worker).
#[derive(Debug)]
pub(crate) struct ApplyOrder {
    held: BTreeMap<(u64, usize), Option<Deltas>>,
    held_bytes: usize,
    /// Held bytes beyond which the table applies on arrival.
    limit: usize,
    /// Each worker's next clock to arrive.
    arrived: Vec<u64>,
    /// False once the limit was passed: batches apply as they arrive.
    ordered: bool,
}

impl ApplyOrder {
    /// For `workers` workers; `limit` bytes may be held before the table
    /// gives up ordering.
    pub(crate) fn new(workers: usize, limit: usize) -> Self {
        ApplyOrder { held: BTreeMap::new(), held_bytes: 0, limit, arrived: vec![0; workers], ordered: true }
    }

    /// Whether batches still go in in order.
    #[cfg(test)]
    pub(crate) fn is_ordered(&self) -> bool {
        self.ordered
    }

    /// Accepts the batch of `clock` from `worker` (refusing a duplicate or
    /// a gap, which changes nothing) and holds it.
    pub(crate) fn arrive(&mut self, worker: usize, clock: u64, deltas: Option<Deltas>) -> Result<()> {
        let Some(next) = self.arrived.get(worker).copied() else {
            return Err(Error::InvalidKeys(format!("worker {worker} is not one of {} workers", self.arrived.len())));
        };
        if clock != next {
            return Err(Error::Mismatch(format!(
                "worker {worker} ended clock {clock} but its next clock is {next} (duplicate or lost update batch)"
            )));
        }
        self.arrived[worker] = next + 1;
        self.held_bytes += deltas.as_ref().map_or(0, |d| d.0.len());
        self.held.insert((clock, worker), deltas);
        Ok(())
    }

    /// Takes the next batch to apply, if it has arrived: the lowest
    /// (clock, worker) among `candidates` (each worker's next clock to
    /// apply, for the workers that may still send one) when ordered, or
    /// simply the oldest held batch when not.
    pub(crate) fn next(
        &mut self,
        candidates: impl Iterator<Item = (u64, usize)>,
    ) -> Option<(u64, usize, Option<Deltas>)> {
        if self.ordered && self.held_bytes > self.limit {
            self.ordered = false;
            tracing::warn!(
                held_bytes = self.held_bytes,
                limit = self.limit,
                "update batches applied on arrival from now on: workers ran too far apart to hold them for the \
                 deterministic order (a looser slack than BSP); results stay correct but are no longer bitwise \
                 reproducible"
            );
        }
        let key = if self.ordered {
            let turn = candidates.min()?;
            self.held.contains_key(&turn).then_some(turn)?
        } else {
            // Any held batch whose worker has no earlier one held; per worker
            // the clocks still go in order (the map is sorted by clock first).
            *self.held.keys().next()?
        };
        let deltas = self.held.remove(&key)?;
        self.held_bytes -= deltas.as_ref().map_or(0, |d| d.0.len());
        Some((key.0, key.1, deltas))
    }

    /// Each worker's clocks that have arrived (applied or held).
    pub(crate) fn arrived(&self) -> &[u64] {
        &self.arrived
    }

    /// Whether `worker` still has batches held (a departed worker's last
    /// batches still go in).
    pub(crate) fn holds_from(&self, worker: usize) -> bool {
        self.held.keys().any(|&(_, w)| w == worker)
    }

    /// Held batches and their bytes (for diagnostics and tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.held.len(), self.held_bytes)
    }
}

//! How the workers agree on the iteration at which to snapshot or stop when
//! one of them is asked to (a signal, an operator's checkpoint or drain):
//! through a small geeps table every worker reads, updates and clocks once
//! per clock. Worker `r` owns slot `r` (two floats: the target iteration
//! and the action). A request made at clock `c` targets the start of clock
//! `c + slack + 2`; a read at that clock sees every update of the clocks
//! before `c + 2`, so every worker sees the target before it gets there and
//! acts at the same iteration. A worker leaves its slot alone while its
//! target is pending, so no two workers ever read different targets for
//! one clock. It owns the slot bookkeeping; it must never decide what a
//! request means for training (`solvers::solve` does).

/// What the workers do at an agreed iteration (ordered: stop includes a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    Snapshot = 1,
    Stop = 2,
}

impl Action {
    fn from_code(code: f32) -> Option<Action> {
        match code.round() as i64 {
            1 => Some(Action::Snapshot),
            2 => Some(Action::Stop),
            _ => None,
        }
    }
}

/// Iterations above this cannot be written exactly as an `f32` target.
const MAX_TARGET: u64 = 1 << 24;

/// One worker's view of the control table.
#[derive(Debug, Clone, Default)]
pub struct Control {
    /// What this worker's slot holds (the sum of its deltas), once known.
    mine: Option<(f32, f32)>,
    /// Requests not written yet, strongest kept.
    queued: Option<Action>,
    /// The target this worker's slot names while it is ahead.
    pending: Option<u64>,
    /// The targets the table held at this run's first read: requests of
    /// an earlier run (restored with its checkpoint), never acted on again.
    stale: Option<Vec<f32>>,
}

impl Control {
    /// Queues a request (a stop outranks a snapshot).
    pub fn ask(&mut self, action: Action) {
        self.queued = Some(self.queued.map_or(action, |q| q.max(action)));
    }

    /// Whether a request is queued or pending.
    pub fn busy(&self) -> bool {
        self.queued.is_some() || self.pending.is_some()
    }

    /// The delta this worker adds to its slot in the clock starting at
    /// iteration `iter` (clock `clock`), given what it read of the table:
    /// the slot's new values minus the old, or zeros. `batches` is
    /// iterations per clock.
    pub fn delta(&mut self, read: &[f32], rank: usize, iter: u64, slack: u64, batches: u64) -> [f32; 2] {
        let slot = (read.get(2 * rank).copied().unwrap_or(0.0), read.get(2 * rank + 1).copied().unwrap_or(0.0));
        self.stale.get_or_insert_with(|| read.to_vec());
        // The first read (after a start or a restore) tells what the slot holds.
        let mine = *self.mine.get_or_insert(slot);
        if self.pending.is_some_and(|t| t <= iter) {
            self.pending = None;
        }
        let (Some(action), None) = (self.queued, self.pending) else { return [0.0, 0.0] };
        let target = (iter / batches + slack + 2) * batches;
        if target >= MAX_TARGET {
            tracing::warn!(target, "a snapshot or stop request cannot be agreed on past iteration 2^24; ignored");
            self.queued = None;
            return [0.0, 0.0];
        }
        self.queued = None;
        self.pending = Some(target);
        let new = (target as f32, action as i32 as f32);
        self.mine = Some(new);
        [new.0 - mine.0, new.1 - mine.1]
    }

    /// The action every worker takes at the start of iteration `iter`, read
    /// from the table at that clock (after this clock's `delta`).
    pub fn due(&self, read: &[f32], workers: usize, iter: u64) -> Option<Action> {
        let stale = |r: usize| self.stale.as_ref().is_some_and(|s| s.get(2 * r) == read.get(2 * r));
        (0..workers)
            .filter(|&r| !stale(r))
            .filter(|&r| read.get(2 * r).is_some_and(|&t| t > 0.0 && t as u64 == iter))
            .filter_map(|r| Action::from_code(read.get(2 * r + 1).copied().unwrap_or(0.0)))
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `workers` slots after applying deltas.
    fn apply(table: &mut [f32], rank: usize, d: [f32; 2]) {
        table[2 * rank] += d[0];
        table[2 * rank + 1] += d[1];
    }

    #[test]
    fn a_request_targets_a_clock_every_worker_reaches_after_seeing_it() {
        let mut table = vec![0.0; 6];
        let mut c = Control::default();
        assert_eq!(c.delta(&table, 1, 10, 0, 1), [0.0, 0.0]);
        c.ask(Action::Snapshot);
        c.ask(Action::Stop);
        c.ask(Action::Snapshot);
        let d = c.delta(&table, 1, 11, 1, 1);
        assert_eq!(d, [14.0, 2.0], "clock 11 + slack 1 + 2, stop outranks snapshot");
        apply(&mut table, 1, d);
        assert_eq!(c.due(&table, 3, 13), None);
        assert_eq!(c.due(&table, 3, 14), Some(Action::Stop));
        // While pending, a new request waits; after the target it is written
        // as a delta from what the slot holds.
        c.ask(Action::Snapshot);
        assert_eq!(c.delta(&table, 1, 12, 1, 1), [0.0, 0.0]);
        let d = c.delta(&table, 1, 14, 1, 1);
        assert_eq!(d, [3.0, -1.0]);
        apply(&mut table, 1, d);
        assert_eq!(c.due(&table, 3, 17), Some(Action::Snapshot));
        assert!(c.busy());
    }

    #[test]
    fn targets_fall_on_clock_boundaries_and_restored_slots_are_the_base() {
        // 4 iterations per clock: a request at iteration 9 (clock 2) targets clock 4.
        let mut table = vec![0.0, 0.0, 8.0, 1.0];
        let mut c = Control::default();
        c.ask(Action::Snapshot);
        let d = c.delta(&table, 1, 9, 0, 4);
        assert_eq!(d, [16.0 - 8.0, 0.0]);
        apply(&mut table, 1, d);
        assert_eq!(c.due(&table, 2, 16), Some(Action::Snapshot));
        assert_eq!(c.due(&table, 2, 8), None, "the old target is gone");
        // A target restored with a checkpoint is never acted on again.
        let restored = vec![12.0, 2.0, 0.0, 0.0];
        let mut fresh = Control::default();
        assert_eq!(fresh.delta(&restored, 1, 8, 0, 4), [0.0, 0.0]);
        assert_eq!(fresh.due(&restored, 2, 12), None);
    }
}

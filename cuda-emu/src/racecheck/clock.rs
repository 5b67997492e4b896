//! Vector clocks of the race detector: one counter per lane (a stream),
//! joined along every ordering edge the driver promises (event record and
//! wait, synchronisation, the legacy stream's implicit waits). An operation
//! is stamped with its lane, its tick and the clock it was enqueued under.
//! Must never shrink a counter: happens-before only grows.

use std::sync::Arc;

/// One operation's place in its lane: the `tick`-th operation of stream `lane`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    pub lane: usize,
    pub tick: u64,
}

/// What is known to have happened: for each lane, how many of its operations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clock(Vec<u64>);

impl Clock {
    pub fn get(&self, lane: usize) -> u64 {
        self.0.get(lane).copied().unwrap_or(0)
    }

    pub fn set(&mut self, lane: usize, tick: u64) {
        if self.0.len() <= lane {
            self.0.resize(lane + 1, 0);
        }
        self.0[lane] = tick;
    }

    /// Takes in everything `other` knows.
    pub fn join(&mut self, other: &Clock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Whether the operation at `e` happened before anything stamped with this clock.
    pub fn covers(&self, e: Epoch) -> bool {
        self.get(e.lane) >= e.tick
    }
}

/// An operation's stamp: where it stands and what happened before it.
#[derive(Debug, Clone)]
pub struct Stamp {
    pub epoch: Epoch,
    pub clock: Arc<Clock>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_takes_the_larger_counter_of_each_lane() {
        let (mut a, mut b) = (Clock::default(), Clock::default());
        a.set(0, 3);
        b.set(2, 5);
        b.set(0, 1);
        a.join(&b);
        assert_eq!((a.get(0), a.get(1), a.get(2)), (3, 0, 5));
        assert!(a.covers(Epoch { lane: 2, tick: 5 }));
        assert!(!a.covers(Epoch { lane: 2, tick: 6 }));
        assert!(!a.covers(Epoch { lane: 7, tick: 1 }));
    }
}

//! The emulated GPU: a layer's compute is a sleep until the GPU would have
//! finished it. The GPU starts a layer when the application issues it, and
//! the application's own time between two layers (its geeps calls) counts
//! in full; a late wake-up from the previous sleep does not. A thread
//! waiting on a real GPU learns of the completion at once; here four
//! workers share two cores, and a sleeping thread wakes a fraction of a
//! millisecond late, more under load, in amounts that differ from worker to
//! worker and would add up to skew between them that no real system has.
//!
//! It owns the timeline of one worker's GPU; it never looks at geeps.

use std::time::{Duration, Instant};

#[derive(Default)]
pub struct EmulatedGpu {
    /// When the last layer ended on the GPU, and when the application woke
    /// up to it.
    last: Option<(Instant, Instant)>,
}

impl EmulatedGpu {
    /// Runs a layer of `us` microseconds; returns the GPU's compute time.
    pub fn compute(&mut self, us: u64) -> Duration {
        let d = Duration::from_micros(us);
        let now = Instant::now();
        let start = match self.last {
            Some((ended, woke)) => ended + now.saturating_duration_since(woke),
            None => now,
        };
        let end = start + d;
        if let Some(left) = end.checked_duration_since(now).filter(|l| !l.is_zero()) {
            std::thread::sleep(left);
        }
        self.last = Some((end, Instant::now()));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_take_at_least_their_time_in_total() {
        let mut gpu = EmulatedGpu::default();
        let start = Instant::now();
        let mut busy = Duration::ZERO;
        for _ in 0..5 {
            busy += gpu.compute(2_000);
        }
        assert_eq!(busy, Duration::from_millis(10));
        // The last layer ends no earlier than the sum of the layers.
        assert!(start.elapsed() >= Duration::from_millis(10));
    }

    #[test]
    fn application_time_between_layers_is_not_absorbed() {
        let mut gpu = EmulatedGpu::default();
        let start = Instant::now();
        gpu.compute(1_000);
        std::thread::sleep(Duration::from_millis(5));
        gpu.compute(1_000);
        assert!(start.elapsed() >= Duration::from_millis(7));
    }
}

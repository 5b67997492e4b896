//! The order of a rank's two kinds of traffic on its own uplink: while its
//! worker's update batches are still being written to their sockets, its
//! keeper's connections hold publications back, so the updates that every
//! keeper waits on leave first and the clock's publications follow them
//! together, as a ring's two phases do (`NetOptions::publish_after_updates`).
//! A hold is bounded: one busy stretch of updates holds publications for at
//! most `hold` in all, so a keeper that stops reading its updates cannot
//! stop this rank's publications to the others. It counts and waits; it
//! never writes and never drops a frame.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Update batches of this rank's worker queued for sockets and not yet
/// flushed, and when the current busy stretch of them began.
pub(crate) struct UplinkGate {
    pending: AtomicUsize,
    busy_since: Mutex<Option<Instant>>,
    idle: Notify,
    hold: Duration,
}

/// One update batch on its way to a socket; dropped once flushed (or when
/// its connection fails, so a lost keeper never keeps the gate shut).
pub(crate) struct InFlight(Arc<UplinkGate>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // The count and the stretch's start change together, under the lock.
        let mut since = self.0.busy_since.lock();
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            *since = None;
            drop(since);
            self.0.idle.notify_waiters();
        }
    }
}

impl UplinkGate {
    pub(crate) fn new(hold: Duration) -> Arc<Self> {
        Arc::new(UplinkGate { pending: AtomicUsize::new(0), busy_since: Mutex::new(None), idle: Notify::new(), hold })
    }

    /// Counts one update batch until the returned guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        let mut since = self.busy_since.lock();
        if self.pending.fetch_add(1, Ordering::AcqRel) == 0 {
            *since = Some(Instant::now());
        }
        InFlight(self.clone())
    }

    /// Whether update batches are still on their way to their sockets.
    pub(crate) fn updates_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// Waits until no update batch is pending, or until the current busy
    /// stretch has held publications for `hold`. True when the updates are out.
    pub(crate) async fn wait_for_updates(&self) -> bool {
        loop {
            let mut notified = std::pin::pin!(self.idle.notified());
            notified.as_mut().enable();
            let Some(since) = *self.busy_since.lock() else { return true };
            if tokio::time::timeout_at(since + self.hold, notified).await.is_err() {
                return self.pending.load(Ordering::Acquire) == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
    }

    #[test]
    fn publications_wait_until_the_last_update_is_flushed() {
        runtime().block_on(async {
            let gate = UplinkGate::new(Duration::from_secs(3600));
            let (a, b) = (gate.begin(), gate.begin());
            let waiter = tokio::spawn({
                let gate = gate.clone();
                async move { gate.wait_for_updates().await }
            });
            tokio::task::yield_now().await;
            drop(a);
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished(), "one update is still pending");
            drop(b);
            assert!(waiter.await.unwrap());
        });
    }

    #[test]
    fn with_nothing_pending_nothing_waits() {
        runtime().block_on(async {
            assert!(UplinkGate::new(Duration::from_secs(3600)).wait_for_updates().await);
        });
    }

    #[test]
    fn a_busy_stretch_holds_publications_for_hold_in_all() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        rt.block_on(async {
            let gate = UplinkGate::new(Duration::from_millis(200));
            let stuck = gate.begin();
            // The first wait ends at the bound, with the update still pending.
            assert!(!gate.wait_for_updates().await);
            // Later waits in the same stretch do not hold again.
            let start = Instant::now();
            assert!(!gate.wait_for_updates().await);
            assert_eq!(start.elapsed(), Duration::ZERO);
            // Once the stretch ends, the next one holds afresh.
            drop(stuck);
            let _next = gate.begin();
            let start = Instant::now();
            assert!(!gate.wait_for_updates().await);
            assert_eq!(start.elapsed(), Duration::from_millis(200));
        });
    }
}

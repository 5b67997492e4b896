//! The end of an instance's life: handing releases to the reclaimer's lanes
//! while it runs, shutting down (threads stopped, cluster left), and the
//! accounting of buffers dropped after a failure or a shutdown. Never
//! acquires a buffer.

use crate::api::instance::{Geeps, Phase};
use crate::engine::puller::PullMsg;
use crate::engine::reclaimer::{self, Release};
use crate::error::{Error, Result};

impl Geeps {
    pub(super) fn send(&self, op: Release) -> Result<()> {
        match self.reclaim_tx.lock().as_ref() {
            Some(lanes) => {
                let tx = if reclaimer::is_local(&op) { &lanes.local } else { &lanes.params };
                tx.send(op).map_err(|_| Error::ShutDown("reclaimer thread has stopped".into()))
            }
            None => Err(Error::ShutDown("instance is shut down".into())),
        }
    }

    /// Stops the background threads and leaves the cluster. Idempotent; also
    /// done on drop. Buffers still held stay valid until the instance drops.
    pub fn shutdown(&self) -> Result<()> {
        {
            let mut phase = self.phase.lock();
            if matches!(*phase, Phase::ShutDown) {
                return Ok(());
            }
            *phase = Phase::ShutDown;
        }
        if let Some(run) = self.running.get() {
            tracing::info!(rank = self.rank(), "geeps stats: {}", run.shared.stats.snapshot());
            // Every call blocked in the engine (from any thread) wakes and
            // returns `Error::ShutDown`.
            run.shared.stop();
        }
        // Closing the reclaimer's queue lets it drain, then closes the pushers'.
        self.reclaim_tx.lock().take();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        let (pullers, others): (Vec<_>, Vec<_>) =
            threads.into_iter().partition(|t| t.thread().name().is_some_and(|n| n.contains("-puller-")));
        let mut panicked = false;
        for t in others {
            panicked |= t.join().is_err();
        }
        self.transport.leave();
        for tx in &self.pull_tx {
            let _ = tx.send(PullMsg::Stop);
        }
        for t in pullers {
            panicked |= t.join().is_err();
        }
        if panicked {
            return Err(Error::ShutDown("a geeps thread panicked; see the log".into()));
        }
        Ok(())
    }
}

impl Geeps {
    /// Notes that releasing a buffer on drop (`what`) failed with `error`:
    /// logged the first time for a cause, counted afterwards.
    pub(crate) fn drop_failed(&self, what: &'static str, error: Error) {
        let mut log = self.drop_log.lock();
        let kind = std::mem::discriminant(&error);
        let already_logged =
            log.cause == Some(kind) || self.running.get().and_then(|r| r.shared.failure()).as_ref() == Some(&error);
        if already_logged {
            log.unlogged += 1;
            tracing::debug!(rank = self.rank(), %error, "{what} on drop failed");
        } else {
            tracing::warn!(
                rank = self.rank(),
                %error,
                "{what} on drop failed; other buffers dropped for the same cause are counted, not logged"
            );
            log.cause = Some(kind);
        }
    }

    /// How many failed releases on drop were counted without a log line of
    /// their own.
    #[cfg(test)]
    pub(crate) fn unlogged_drop_failures(&self) -> u64 {
        self.drop_log.lock().unlogged
    }
}

impl Drop for Geeps {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "geeps shutdown");
        }
        let log = self.drop_log.get_mut();
        if log.unlogged > 0 {
            tracing::info!(
                rank = self.transport.rank(),
                buffers = log.unlogged,
                "buffers dropped after the instance failed or shut down were not released (cause logged above)"
            );
        }
        if let Some(run) = self.running.get() {
            for (_, live) in self.app.get_mut().live.drain() {
                run.shared.discard(live.acquired);
            }
        }
    }
}

//! What an instance tells about itself: rank, tables, plan, clocks, data
//! ages, counters, operator requests, and the deadline of blocking calls.
//! Reads state (and sets the deadline); never moves data or changes the
//! recorded order.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::api::instance::{Geeps, LiveKind};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::plan::planner::Plan;
use crate::stats::Stats;
use crate::table::TableSpec;

impl Geeps {
    /// How long a blocking call waits before failing with [`Error::Timeout`]
    /// (starts as [`Config::wait_deadline`]).
    pub fn wait_deadline(&self) -> Duration {
        Duration::from_nanos(self.wait_deadline_ns.load(Ordering::Relaxed))
    }

    /// Changes the deadline of blocking calls that start from now on (a
    /// long one for a slow first iteration, a short one afterwards, say).
    /// Calls already waiting keep theirs.
    pub fn set_wait_deadline(&self, deadline: Duration) -> Result<()> {
        if deadline.is_zero() {
            return Err(Error::InvalidConfig {
                field: "wait_deadline",
                reason: "zero; a blocking call needs time to wait".into(),
            });
        }
        self.wait_deadline_ns.store(u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        Ok(())
    }

    /// This worker's rank in its cluster.
    pub fn rank(&self) -> usize {
        self.transport.rank()
    }

    /// The number of workers in the cluster.
    pub fn num_workers(&self) -> usize {
        self.transport.num_workers()
    }

    /// Floats per row.
    pub fn row_width(&self) -> usize {
        self.config.row_width
    }

    /// The configuration the instance was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The declared tables, indexed by [`TableId`](crate::TableId).
    pub fn tables(&self) -> &[TableSpec] {
        &self.tables
    }

    /// The placement plan (after `finish_virtual_iteration`).
    pub fn plan(&self) -> Result<Plan> {
        Ok(self.running("plan")?.plan.clone())
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.running.get().map(|r| r.shared.stats.snapshot()).unwrap_or_default()
    }

    /// Bytes of device memory the access buffer pool has allocated so far:
    /// it grows on demand to what the iteration holds at once (prefetches
    /// included), never above [`Plan::pool_bytes`]; 0 before
    /// `finish_virtual_iteration`.
    pub fn pool_allocated_bytes(&self) -> usize {
        self.running.get().map_or(0, |r| r.shared.pool.allocated())
    }

    /// This worker's clock of parameter table `table`: how many times it has
    /// called `table_clock` on it (0 before the first). A read with slack
    /// `s` at clock `c` sees every worker's updates of the clocks below
    /// `c - s`.
    pub fn current_table_clock(&self, table: crate::TableId) -> Result<u64> {
        self.check_param_table(table)?;
        Ok(self.app.lock().clocks[table.0 as usize])
    }

    /// Whether an operator asked the cluster to drain (geeps-net's admin
    /// endpoint): stop at the next clock boundary, after saving what must
    /// survive (a checkpoint, a snapshot). Always false in process.
    pub fn drain_requested(&self) -> bool {
        self.transport.drain_requested()
    }

    /// How many checkpoints an operator has asked for so far (geeps-net's
    /// admin endpoint, relayed to every rank): when it grows, save a
    /// checkpoint at a clock boundary the workers agree on. Always 0 in
    /// process.
    pub fn checkpoint_requests(&self) -> u64 {
        self.transport.checkpoint_requests()
    }

    /// This worker's clock: the lowest clock of its parameter tables (all
    /// equal when it only calls `clock`); 0 without parameter tables.
    pub fn current_clock(&self) -> u64 {
        let app = self.app.lock();
        self.param_tables().iter().map(|t| app.clocks[t.0 as usize]).min().unwrap_or(0)
    }

    /// The data age of the read buffer released by `ticket` (see
    /// [`RawBuffer::ticket`](crate::api::buffers::RawBuffer::ticket)): the clock its rows were read at, so every
    /// worker's updates of the clocks below it are included (the lowest
    /// over its tables). `None` for a buffer that is not a read, or holds no
    /// rows; an error if `ticket` is not held.
    pub fn data_age(&self, ticket: u64) -> Result<Option<u64>> {
        let app = self.app.lock();
        let Some(live) = app.live.get(&ticket) else {
            return Err(Error::InvalidHandle(format!(
                "buffer {ticket} is not held: it was already released, or never acquired from this instance"
            )));
        };
        if live.kind != LiveKind::Read {
            return Ok(None);
        }
        Ok(live.acquired.ages.iter().map(|&(_, age)| age).min())
    }

    /// Zeroes the counters and restarts the stall-fraction wall clock.
    pub fn reset_stats(&self) {
        if let Some(r) = self.running.get() {
            r.shared.stats.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_wait_deadline_can_change_between_calls() {
        use std::time::{Duration, Instant};

        use crate::{keys, Config, Error, Geeps, InProcessCluster, Slack};

        // Worker 1 never clocks, so worker 0's BSP read after its clock waits.
        let cluster = InProcessCluster::new(2).unwrap();
        let mut b = Geeps::builder(Config::default().with_row_width(2).with_wait_deadline(Duration::from_secs(300)));
        let w = b.parameter_table("w", 2);
        b.transport(cluster.transport(0).unwrap());
        let ps = b.build().unwrap();
        ps.finish_virtual_iteration().unwrap();
        assert_eq!(ps.wait_deadline(), Duration::from_secs(300));
        assert!(matches!(
            ps.set_wait_deadline(Duration::ZERO),
            Err(Error::InvalidConfig { field: "wait_deadline", .. })
        ));
        assert_eq!(ps.wait_deadline(), Duration::from_secs(300), "a refused deadline changes nothing");
        ps.clock().unwrap();
        ps.set_wait_deadline(Duration::from_millis(200)).unwrap();
        let start = Instant::now();
        match ps.read_keys(&keys(w, 0..2), Slack::BSP) {
            Err(Error::Timeout { waited_ms, .. }) => assert!(waited_ms >= 200, "waited {waited_ms} ms"),
            Err(other) => panic!("expected a timeout, got {other}"),
            Ok(_) => panic!("a BSP read went through without worker 1's clock"),
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the new deadline was not used");
    }
}

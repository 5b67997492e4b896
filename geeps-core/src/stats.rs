//! Counters of what an instance did and how long the application waited.
//! Lock-free atomics on the hot path; `Stats` is the readable snapshot.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The kinds of API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// `read` (by handle or keys).
    Read,
    /// `post_read`.
    PostRead,
    /// `pre_update`.
    PreUpdate,
    /// `update` (or a discarded pre-update).
    Update,
    /// `local_access`.
    LocalAccess,
    /// `post_local_access`.
    PostLocalAccess,
    /// `table_clock`.
    TableClock,
}

impl CallKind {
    /// Every call kind, in the order stats print them.
    pub const ALL: [CallKind; 7] = [
        CallKind::Read,
        CallKind::PostRead,
        CallKind::PreUpdate,
        CallKind::Update,
        CallKind::LocalAccess,
        CallKind::PostLocalAccess,
        CallKind::TableClock,
    ];

    /// The call's name as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Read => "read",
            CallKind::PostRead => "post_read",
            CallKind::PreUpdate => "pre_update",
            CallKind::Update => "update",
            CallKind::LocalAccess => "local_access",
            CallKind::PostLocalAccess => "post_local_access",
            CallKind::TableClock => "table_clock",
        }
    }
}

/// Count and blocked time of one call kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallStats {
    /// Calls made.
    pub count: u64,
    /// Time the application spent blocked in them.
    pub blocked: Duration,
}

/// A snapshot of an instance's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Per call kind, in [`CallKind::ALL`] order.
    pub calls: Vec<(CallKind, CallStats)>,
    /// Wall time since `finish_virtual_iteration` (or since stats were reset).
    pub wall: Duration,
    /// Total time the application spent blocked inside geeps calls.
    pub blocked: Duration,
    /// `blocked / wall`: the application's stall fraction.
    pub stall_fraction: f64,
    /// Bytes copied from host memory to device memory.
    pub bytes_host_to_device: u64,
    /// Bytes copied from device memory to host memory.
    pub bytes_device_to_host: u64,
    /// Calls that were not served from the recorded sequence's prefetch.
    pub slow_path_calls: u64,
    /// Acquisitions served from a prefetched buffer.
    pub prefetch_hits: u64,
    /// Times the allocator restarted because the application left the recorded order.
    pub resyncs: u64,
    /// Local accesses served with the buffer the previous access of the same
    /// rows posted (see [`crate::Plan::handovers`]).
    pub handovers: u64,
    /// Reads handed the published rows themselves, with no copy (where the
    /// host addresses device memory, for consecutive rows of one table).
    pub reads_in_place: u64,
}

impl Stats {
    /// The counters of calls of `kind`.
    pub fn call(&self, kind: CallKind) -> CallStats {
        self.calls.iter().find(|(k, _)| *k == kind).map(|(_, s)| *s).unwrap_or_default()
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wall {:.3}s blocked {:.3}s stall {:.1}% h2d {} B d2h {} B slow-path {} prefetch-hits {} resyncs {} hand-overs {} reads-in-place {}",
            self.wall.as_secs_f64(),
            self.blocked.as_secs_f64(),
            self.stall_fraction * 100.0,
            self.bytes_host_to_device,
            self.bytes_device_to_host,
            self.slow_path_calls,
            self.prefetch_hits,
            self.resyncs,
            self.handovers,
            self.reads_in_place
        )?;
        for (kind, s) in &self.calls {
            if s.count > 0 {
                write!(f, " | {} x{} {:.3}s", kind.name(), s.count, s.blocked.as_secs_f64())?;
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct Counter {
    count: AtomicU64,
    blocked_ns: AtomicU64,
}

/// The live counters of an instance.
pub(crate) struct StatsCollector {
    calls: [Counter; 7],
    pub(crate) h2d: AtomicU64,
    pub(crate) d2h: AtomicU64,
    pub(crate) slow_path: AtomicU64,
    pub(crate) prefetch_hits: AtomicU64,
    pub(crate) resyncs: AtomicU64,
    pub(crate) handovers: AtomicU64,
    pub(crate) reads_in_place: AtomicU64,
    started: Mutex<Option<Instant>>,
}

impl StatsCollector {
    pub(crate) fn new() -> Self {
        StatsCollector {
            calls: Default::default(),
            h2d: AtomicU64::new(0),
            d2h: AtomicU64::new(0),
            slow_path: AtomicU64::new(0),
            prefetch_hits: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            reads_in_place: AtomicU64::new(0),
            started: Mutex::new(None),
        }
    }

    fn slot(kind: CallKind) -> usize {
        CallKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
    }

    pub(crate) fn record_call(&self, kind: CallKind, blocked: Duration) {
        let c = &self.calls[Self::slot(kind)];
        c.count.fetch_add(1, Ordering::Relaxed);
        c.blocked_ns.fetch_add(blocked.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Starts (or restarts) the wall clock and zeroes the counters.
    pub(crate) fn reset(&self) {
        for c in &self.calls {
            c.count.store(0, Ordering::Relaxed);
            c.blocked_ns.store(0, Ordering::Relaxed);
        }
        for a in [
            &self.h2d,
            &self.d2h,
            &self.slow_path,
            &self.prefetch_hits,
            &self.resyncs,
            &self.handovers,
            &self.reads_in_place,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        *self.started.lock() = Some(Instant::now());
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let calls: Vec<(CallKind, CallStats)> = CallKind::ALL
            .iter()
            .map(|k| {
                let c = &self.calls[Self::slot(*k)];
                (
                    *k,
                    CallStats {
                        count: c.count.load(Ordering::Relaxed),
                        blocked: Duration::from_nanos(c.blocked_ns.load(Ordering::Relaxed)),
                    },
                )
            })
            .collect();
        let blocked: Duration = calls.iter().map(|(_, s)| s.blocked).sum();
        let wall = self.started.lock().map(|t| t.elapsed()).unwrap_or_default();
        let stall_fraction = if wall.is_zero() { 0.0 } else { (blocked.as_secs_f64() / wall.as_secs_f64()).min(1.0) };
        Stats {
            calls,
            wall,
            blocked,
            stall_fraction,
            bytes_host_to_device: self.h2d.load(Ordering::Relaxed),
            bytes_device_to_host: self.d2h.load(Ordering::Relaxed),
            slow_path_calls: self.slow_path.load(Ordering::Relaxed),
            prefetch_hits: self.prefetch_hits.load(Ordering::Relaxed),
            resyncs: self.resyncs.load(Ordering::Relaxed),
            handovers: self.handovers.load(Ordering::Relaxed),
            reads_in_place: self.reads_in_place.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_fraction_is_blocked_over_wall() {
        let s = StatsCollector::new();
        s.reset();
        std::thread::sleep(Duration::from_millis(20));
        s.record_call(CallKind::Read, Duration::from_millis(10));
        s.record_call(CallKind::Read, Duration::from_millis(0));
        let snap = s.snapshot();
        assert_eq!(snap.call(CallKind::Read).count, 2);
        assert!(snap.stall_fraction > 0.0 && snap.stall_fraction <= 0.5 + 1e-9, "{}", snap.stall_fraction);
        assert!(snap.to_string().contains("read x2"));
    }
}

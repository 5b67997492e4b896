//! Failure handling seen from the application: a shutdown from another
//! thread wakes a call blocked in the engine at once, and buffers dropped
//! after a failure or a shutdown log their cause once, not once each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{span, Event, Level, Metadata, Subscriber};

use crate::{keys, Config, Error, Geeps, InProcessCluster, Slack, TableId};

/// Worker 0 of two; worker 1 never joins, so a BSP read after worker 0's
/// first clock waits for it (here for up to a minute).
fn lone_worker() -> (Geeps, TableId, InProcessCluster) {
    let cluster = InProcessCluster::new(2).unwrap();
    let mut b = Geeps::builder(Config::default().with_row_width(2).with_wait_deadline(Duration::from_secs(60)));
    let w = b.parameter_table("w", 4);
    b.transport(cluster.transport(0).unwrap());
    (b.build().unwrap(), w, cluster)
}

/// Runs `blocked` on another thread, shuts the instance down from this one
/// once it is blocked, and returns what the call returned and how long after
/// the shutdown began it returned.
fn shut_down_under(ps: &Geeps, blocked: impl FnOnce() -> Result<(), Error> + Send) -> (Result<(), Error>, Duration) {
    std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            let r = blocked();
            (r, Instant::now())
        });
        // Long enough for the call to be waiting; a minute shorter than its deadline.
        std::thread::sleep(Duration::from_millis(500));
        let shutdown_at = Instant::now();
        ps.shutdown().unwrap();
        let (result, returned_at) = waiter.join().unwrap();
        (result, returned_at.saturating_duration_since(shutdown_at))
    })
}

#[test]
fn shutdown_from_another_thread_wakes_a_blocked_prefetched_read() {
    let (ps, w, _cluster) = lone_worker();
    let r = ps.virtual_read(&keys(w, 0..4), Slack::BSP).unwrap();
    ps.virtual_post_read(r).unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();
    ps.read(r).unwrap().post().unwrap();
    ps.table_clock(w).unwrap();
    // Clock 1 needs worker 1's clock 0, which never comes.
    let (result, after) = shut_down_under(&ps, || ps.read(r).map(drop));
    assert!(matches!(result, Err(Error::ShutDown(_))), "{result:?}");
    // Promised: within 1 s. Bounded generously (a loaded machine); the
    // deadline it would otherwise wait for is 60 s.
    assert!(after < Duration::from_secs(5), "the blocked read returned {after:?} after shutdown");
}

#[test]
fn shutdown_from_another_thread_wakes_a_blocked_keyed_read() {
    let (ps, w, _cluster) = lone_worker();
    ps.finish_virtual_iteration().unwrap();
    ps.clock().unwrap();
    let (result, after) = shut_down_under(&ps, || ps.read_keys(&keys(w, 0..4), Slack::BSP).map(drop));
    assert!(matches!(result, Err(Error::ShutDown(_))), "{result:?}");
    assert!(after < Duration::from_secs(5), "the blocked read returned {after:?} after shutdown");
    // Later calls say the instance is shut down.
    assert!(ps.read_keys(&keys(w, 0..4), Slack::BSP).is_err());
}

/// Counts WARN and ERROR events on the thread it is the default of.
#[derive(Default)]
struct Loud {
    count: AtomicUsize,
    lines: Mutex<Vec<String>>,
}

struct Counting(Arc<Loud>);

impl Subscriber for Counting {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() <= Level::WARN {
            self.0.count.fetch_add(1, Ordering::Relaxed);
            self.0.lines.lock().push(format!("{event:?}"));
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

fn loud_lines(body: impl FnOnce()) -> (usize, Vec<String>) {
    let loud = Arc::new(Loud::default());
    tracing::subscriber::with_default(Counting(loud.clone()), body);
    let lines = loud.lines.lock().clone();
    (loud.count.load(Ordering::Relaxed), lines)
}

fn single_worker() -> (Geeps, TableId, TableId) {
    let mut b = Geeps::builder(Config::default().with_row_width(2).with_device_memory(1 << 20));
    let w = b.parameter_table("w", 4);
    let act = b.local_table("act", 4);
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    (ps, w, act)
}

#[test]
fn buffers_dropped_after_a_failure_do_not_log_one_line_each() {
    let (ps, w, act) = single_worker();
    let (loud, lines) = loud_lines(|| {
        let reads: Vec<_> = (0..4).map(|r| ps.read_keys(&keys(w, r..r + 1), Slack::BSP).unwrap()).collect();
        let local = ps.local_access_keys(&keys(act, 0..2), true).unwrap();
        let update = ps.pre_update_keys(&keys(w, 0..2)).unwrap();
        let lost = Error::PeerLost { rank: 1, address: "10.0.0.2:29600".into(), reason: "silent for 30.0 s".into() };
        ps.running.get().unwrap().shared.fail(lost);
        drop(reads);
        drop(local);
        drop(update);
    });
    // The failure itself, logged once by the instance; no line per buffer.
    assert_eq!(loud, 1, "{lines:#?}");
    assert!(lines[0].contains("geeps instance failed"), "{lines:#?}");
    assert_eq!(ps.unlogged_drop_failures(), 6);
}

#[test]
fn buffers_dropped_after_a_shutdown_log_the_cause_once() {
    let (ps, w, act) = single_worker();
    let (loud, lines) = loud_lines(|| {
        let reads: Vec<_> = (0..3).map(|r| ps.read_keys(&keys(w, r..r + 1), Slack::BSP).unwrap()).collect();
        let local = ps.local_access_keys(&keys(act, 0..2), true).unwrap();
        ps.shutdown().unwrap();
        drop(reads);
        drop(local);
    });
    assert_eq!(loud, 1, "{lines:#?}");
    assert!(lines[0].contains("shut down") && lines[0].contains("on drop failed"), "{lines:#?}");
    assert_eq!(ps.unlogged_drop_failures(), 3);
}

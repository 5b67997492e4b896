//! Every error a user can provoke returns a clear `Error` and leaves the
//! instance usable; nothing panics. On every device
//! (`geeps_testkit::device_test!`): the errors do not depend on where the
//! rows live, and an instance dropped with buffers held frees device memory
//! on a GPU as well.

use std::time::Duration;

use geeps::{keys, Config, Error, Geeps, GeepsBuilder, InProcessCluster, ReleaseAs, RowKey, Slack, TableId};
use geeps_testkit::{device_test, Backend};

fn config() -> Config {
    Config::default().with_row_width(4).with_device_memory(1 << 20).with_wait_deadline(Duration::from_secs(10))
}

/// A builder for `config` on a fresh device of `backend`.
fn builder(backend: Backend, config: Config) -> GeepsBuilder {
    backend.builder(config).0
}

fn one_table(backend: Backend) -> (Geeps, TableId, TableId) {
    let mut b = builder(backend, config());
    let w = b.parameter_table("w", 4);
    let a = b.local_table("act", 4);
    (b.build().unwrap(), w, a)
}

device_test!(invalid_config_names_the_field, |backend| {
    let bad = builder(backend, config().with_row_width(0)).build();
    assert!(matches!(bad, Err(Error::InvalidConfig { field: "row_width", .. })));
    let mut b = builder(backend, config());
    b.parameter_table("w", 0);
    assert!(matches!(b.build(), Err(Error::InvalidConfig { field: "tables", reason }) if reason.contains("0 rows")));
    let mut b = builder(backend, config());
    b.parameter_table("w", 1);
    b.local_table("w", 1);
    assert!(matches!(b.build(), Err(Error::InvalidConfig { field: "tables", reason }) if reason.contains("twice")));
    assert!(matches!(InProcessCluster::new(0), Err(Error::InvalidConfig { field: "workers", .. })));
    let c = InProcessCluster::new(1).unwrap();
    assert!(matches!(c.transport(1), Err(Error::InvalidConfig { field: "rank", .. })));
    let t = c.transport(0).unwrap();
    assert!(
        matches!(c.transport(0), Err(Error::InvalidConfig { field: "rank", reason }) if reason.contains("already"))
    );
    drop(t);
    c.transport(0).expect("a rank is free again once its transport is gone");
});

device_test!(unknown_tables_rows_and_wrong_kinds, |backend| {
    let (ps, w, a) = one_table(backend);
    let err = ps.virtual_read(&[RowKey::new(TableId(9), 0)], Slack::BSP).unwrap_err();
    assert_eq!(err, Error::UnknownTable { table: 9, declared: 2 });
    let err = ps.virtual_read(&[RowKey::new(w, 4)], Slack::BSP).unwrap_err();
    assert!(matches!(&err, Error::UnknownRow { rows: 4, .. }), "{err}");
    assert!(err.to_string().contains("row 4"), "{err}");
    assert!(matches!(ps.virtual_local_access(&keys(w, 0..1), true), Err(Error::InvalidKeys(_))));
    assert!(matches!(ps.virtual_read(&keys(a, 0..1), Slack::BSP), Err(Error::InvalidKeys(_))));
    assert!(matches!(ps.virtual_table_clock(a), Err(Error::InvalidKeys(m)) if m.contains("local")));
    assert!(matches!(ps.virtual_read(&[], Slack::BSP), Err(Error::InvalidKeys(_))));
    ps.finish_virtual_iteration().unwrap();
    assert!(matches!(ps.read_keys(&[RowKey::new(w, 99)], Slack::BSP), Err(Error::UnknownRow { .. })));
    assert!(
        matches!(ps.local_access_keys(&[RowKey::new(a, 0), RowKey::new(a, 0)], true), Err(Error::InvalidKeys(m)) if m.contains("twice"))
    );
    assert!(matches!(ps.table_clock(a), Err(Error::InvalidKeys(_))));
    // Still usable.
    ps.read_keys(&keys(w, 0..4), Slack::BSP).unwrap().post().unwrap();
});

device_test!(calls_in_the_wrong_phase, |backend| {
    let (ps, w, _) = one_table(backend);
    let h = ps.virtual_read(&keys(w, 0..2), Slack::BSP).unwrap();
    assert!(matches!(ps.read(h), Err(Error::InvalidState { call: "read", .. })));
    assert!(matches!(ps.plan(), Err(Error::InvalidState { .. })));
    // An acquisition never released in the recording is refused at finish...
    assert!(matches!(ps.finish_virtual_iteration(), Err(Error::InvalidHandle(m)) if m.contains("never released")));
    // ...and the recording can be completed and finished afterwards.
    ps.virtual_post_read(h).unwrap();
    ps.finish_virtual_iteration().unwrap();
    assert!(matches!(ps.finish_virtual_iteration(), Err(Error::InvalidState { .. })));
    assert!(matches!(ps.virtual_read(&keys(w, 0..2), Slack::BSP), Err(Error::InvalidState { .. })));
    ps.read(h).unwrap().post().unwrap();
    ps.shutdown().unwrap();
    ps.shutdown().unwrap();
    assert!(matches!(ps.read(h), Err(Error::InvalidState { state: "shut down", .. })));
    assert!(matches!(ps.table_clock(w), Err(Error::InvalidState { .. })));
});

device_test!(double_release_and_wrong_release_kind, |backend| {
    let (ps, w, a) = one_table(backend);
    ps.finish_virtual_iteration().unwrap();
    let raw = ps.read_keys(&keys(w, 0..2), Slack::BSP).unwrap().into_raw();
    // A read buffer cannot be applied as an update; it stays held.
    assert!(
        matches!(ps.release_raw(raw.ticket, ReleaseAs::Update), Err(Error::InvalidHandle(m)) if m.contains("post_read"))
    );
    ps.release_raw(raw.ticket, ReleaseAs::PostRead).unwrap();
    assert!(
        matches!(ps.release_raw(raw.ticket, ReleaseAs::PostRead), Err(Error::InvalidHandle(m)) if m.contains("already released"))
    );
    assert!(matches!(ps.release_raw(12345, ReleaseAs::PostRead), Err(Error::InvalidHandle(_))));
    let up = ps.pre_update_keys(&keys(w, 0..1)).unwrap().into_raw();
    assert!(matches!(ps.release_raw(up.ticket, ReleaseAs::PostLocal { save: None }), Err(Error::InvalidHandle(_))));
    ps.release_raw(up.ticket, ReleaseAs::Discard).unwrap();
    let l = ps.local_access_keys(&keys(a, 0..1), true).unwrap().into_raw();
    ps.release_raw(l.ticket, ReleaseAs::PostLocal { save: Some(false) }).unwrap();
});

device_test!(budget_too_small_names_the_bytes_needed, |backend| {
    let mut b = builder(backend, config().with_row_width(128).with_device_memory(1000));
    let w = b.parameter_table("w", 4);
    let ps = b.build().unwrap();
    let r = ps.virtual_read(&keys(w, 0..4), Slack::BSP).unwrap();
    ps.virtual_post_read(r).unwrap();
    let err = ps.finish_virtual_iteration().unwrap_err();
    assert_eq!(err, Error::BudgetTooSmall { budget: 1000, needed: 2048, what: "one peak of access buffers" });
    assert!(err.to_string().contains("at least 2048"), "{err}");
});

device_test!(a_wait_past_the_deadline_names_the_worker_behind, |backend| {
    let cluster = InProcessCluster::new(2).unwrap();
    let mut b = builder(
        backend,
        config().with_wait_deadline(Duration::from_millis(300)).with_slow_wait_log(Duration::from_millis(100)),
    );
    let w = b.parameter_table("w", 2);
    let mut b1 = builder(backend, config());
    b1.parameter_table("w", 2);
    b1.transport(cluster.transport(1).unwrap());
    let _idle = b1.build().unwrap(); // joined, but never clocks
    b.transport(cluster.transport(0).unwrap());
    let ps = b.build().unwrap();
    let r = ps.virtual_read(&keys(w, 0..2), Slack::BSP).unwrap();
    ps.virtual_post_read(r).unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();
    ps.read(r).unwrap().post().unwrap();
    ps.table_clock(w).unwrap();
    let err = ps.read(r).err().expect("worker 1 never clocks");
    assert!(matches!(&err, Error::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("worker 1"), "{err}");
    // The keyed path says the same.
    let err = ps.read_keys(&keys(w, 0..2), Slack::BSP).err().unwrap();
    assert!(err.to_string().contains("worker 1 has ended 0 clocks"), "{err}");
    // Slack 1 needs nothing from worker 1 yet.
    ps.read_keys(&keys(w, 0..2), Slack::Bounded(1)).unwrap().post().unwrap();
});

device_test!(mismatched_tables_are_refused_at_join, |backend| {
    let cluster = InProcessCluster::new(2).unwrap();
    let mut a = builder(backend, config());
    a.parameter_table("w", 2);
    a.transport(cluster.transport(0).unwrap());
    let _a = a.build().unwrap();
    let mut b = builder(backend, config());
    b.parameter_table("w", 3);
    b.transport(cluster.transport(1).unwrap());
    assert!(matches!(b.build(), Err(Error::Mismatch(m)) if m.contains("tables")));
    let mut c = builder(backend, config().with_row_width(8));
    c.parameter_table("w", 2);
    c.transport(cluster.transport(1).unwrap());
    assert!(matches!(c.build(), Err(Error::Mismatch(m)) if m.contains("row width")));
});

device_test!(dropping_an_instance_mid_iteration_is_safe_and_frees_the_others, |backend| {
    let cluster = InProcessCluster::new(2).unwrap();
    let make = |rank| {
        let mut b = builder(backend, config());
        let w = b.parameter_table("w", 2);
        b.transport(cluster.transport(rank).unwrap());
        let ps = b.build().unwrap();
        let r = ps.virtual_read(&keys(w, 0..2), Slack::BSP).unwrap();
        let u = ps.virtual_pre_update(&keys(w, 0..2)).unwrap();
        ps.virtual_update(u).unwrap();
        ps.virtual_post_read(r).unwrap();
        ps.virtual_table_clock(w).unwrap();
        ps.finish_virtual_iteration().unwrap();
        (ps, w, r, u)
    };
    let (p0, w, r, _) = make(0);
    let (p1, _, r1, u1) = make(1);
    // Worker 1 holds buffers and is dropped in the middle of its iteration.
    let held = p1.read(r1).unwrap().into_raw();
    let upd = p1.pre_update(u1).unwrap().into_raw();
    let _ = (held, upd);
    drop(p1);
    // Worker 0 goes on: the departed worker no longer holds back the age.
    for _ in 0..3 {
        p0.read(r).unwrap().post().unwrap();
        p0.table_clock(w).unwrap();
    }
    p0.shutdown().unwrap();
});

//! End-to-end behaviour of one or more in-process workers on the host device.

use std::sync::Arc;
use std::time::Duration;

use geeps::{keys, Config, Error, Geeps, InProcessCluster, RowKey, Slack, TableId};

fn config() -> Config {
    Config::default().with_row_width(4).with_device_memory(1 << 20).with_wait_deadline(Duration::from_secs(20))
}

/// One worker: read, update by +1 per row per clock, check it sees its writes.
#[test]
fn single_worker_recorded_iterations_accumulate_updates() {
    let mut b = Geeps::builder(config());
    let w = b.parameter_table("w", 8);
    let act = b.local_table("act", 2);
    let ps = b.build().unwrap();
    let wk = keys(w, 0..8);
    let ak = keys(act, 0..2);
    let r = ps.virtual_read(&wk, Slack::BSP).unwrap();
    let l = ps.virtual_local_access(&ak, true).unwrap();
    let u = ps.virtual_pre_update(&wk).unwrap();
    ps.virtual_update(u).unwrap();
    ps.virtual_post_local_access(l, true).unwrap();
    ps.virtual_post_read(r).unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();

    for it in 0..10 {
        let read = ps.read(r).unwrap();
        assert!(read.as_slice().unwrap().iter().all(|v| *v == it as f32), "iteration {it}: {:?}", read.as_slice());
        let mut local = ps.local_access(l).unwrap();
        let s = local.as_mut_slice().unwrap();
        assert!(s.iter().all(|v| *v == it as f32));
        s.iter_mut().for_each(|v| *v += 1.0);
        let mut up = ps.pre_update(u).unwrap();
        assert!(up.as_slice().unwrap().iter().all(|v| *v == 0.0));
        up.as_mut_slice().unwrap().iter_mut().for_each(|v| *v = 1.0);
        up.update().unwrap();
        local.post().unwrap();
        read.post().unwrap();
        ps.table_clock(w).unwrap();
    }
    let stats = ps.stats();
    assert_eq!(stats.slow_path_calls, 0, "{stats}");
    assert_eq!(stats.resyncs, 0, "{stats}");
    assert!(stats.prefetch_hits >= 29, "{stats}");
    ps.shutdown().unwrap();
}

/// Keyed (unrecorded) calls work with no virtual iteration at all.
#[test]
fn keyed_calls_without_recording() {
    let mut b = Geeps::builder(config());
    let w = b.parameter_table("w", 3);
    let ps = b.build().unwrap();
    assert!(matches!(ps.read_keys(&keys(w, 0..3), Slack::BSP), Err(Error::InvalidState { .. })));
    ps.finish_virtual_iteration().unwrap();
    for _ in 0..3 {
        let mut up = ps.pre_update_keys(&[RowKey::new(w, 1)]).unwrap();
        up.as_mut_slice().unwrap().fill(2.0);
        up.update().unwrap();
        ps.clock().unwrap();
    }
    let r = ps.read_keys(&keys(w, 0..3), Slack::BSP).unwrap();
    let s = r.as_slice().unwrap();
    assert_eq!(&s[0..4], &[0.0; 4]);
    assert_eq!(&s[4..8], &[6.0; 4]);
    assert!(ps.stats().slow_path_calls >= 4);
}

/// Several workers under BSP: every read at clock c sees all updates of clocks < c.
#[test]
fn bsp_workers_see_each_others_updates() {
    let workers = 4;
    let cluster = InProcessCluster::new(workers).unwrap();
    let handles: Vec<_> = (0..workers)
        .map(|rank| {
            let t = cluster.transport(rank).unwrap();
            std::thread::spawn(move || {
                let mut b = Geeps::builder(config());
                let w = b.parameter_table("w", 5);
                b.transport(t);
                let ps = b.build().unwrap();
                let k = keys(w, 0..5);
                let r = ps.virtual_read(&k, Slack::BSP).unwrap();
                let u = ps.virtual_pre_update(&k).unwrap();
                ps.virtual_update(u).unwrap();
                ps.virtual_post_read(r).unwrap();
                ps.virtual_table_clock(w).unwrap();
                ps.finish_virtual_iteration().unwrap();
                for c in 0..20u32 {
                    let read = ps.read(r).unwrap();
                    // Each worker adds (rank + 1) per clock: every update of
                    // clocks < c is in, and faster workers' of clock c may be.
                    let floor = (c * 10) as f32;
                    let ok = read.as_slice().unwrap().iter().all(|v| *v >= floor && *v <= floor + 10.0);
                    assert!(ok, "rank {rank} clock {c}: {:?}", read.as_slice());
                    let mut up = ps.pre_update(u).unwrap();
                    up.as_mut_slice().unwrap().fill((rank + 1) as f32);
                    up.update().unwrap();
                    drop(read);
                    ps.table_clock(w).unwrap();
                }
                ps.stats()
            })
        })
        .collect();
    for h in handles {
        let stats = h.join().unwrap();
        assert_eq!(stats.slow_path_calls, 0, "{stats}");
    }
}

#[test]
fn handles_of_another_instance_and_wrong_kind_are_rejected() {
    let build = || {
        let mut b = Geeps::builder(config());
        let w = b.parameter_table("w", 2);
        (b.build().unwrap(), w)
    };
    let (a, w) = build();
    let (b, _) = build();
    let ra = a.virtual_read(&keys(w, 0..2), Slack::BSP).unwrap();
    let pa = a.virtual_post_read(ra).unwrap();
    let rb = b.virtual_read(&keys(w, 0..2), Slack::BSP).unwrap();
    b.virtual_post_read(rb).unwrap();
    a.finish_virtual_iteration().unwrap();
    b.finish_virtual_iteration().unwrap();
    assert!(matches!(a.read(rb), Err(Error::InvalidHandle(m)) if m.contains("instance")));
    assert!(matches!(a.read(pa), Err(Error::InvalidHandle(m)) if m.contains("post_read")));
    assert!(matches!(a.pre_update(ra), Err(Error::InvalidHandle(_))));
    assert!(matches!(a.table_clock(TableId(7)), Err(Error::UnknownTable { table: 7, .. })));
    // Still usable after the errors.
    let r = a.read(ra).unwrap();
    assert_eq!(r.rows(), 2);
    let _ = Arc::new(());
}

/// A recording with clocks but no acquisitions leaves nothing to prefetch;
/// keyed calls and clocks still work.
#[test]
fn clock_only_recording_does_not_stall() {
    let mut b = Geeps::builder(config());
    let w = b.parameter_table("w", 2);
    let ps = b.build().unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();
    for _ in 0..3 {
        let mut up = ps.pre_update_keys(&keys(w, 0..2)).unwrap();
        up.as_mut_slice().unwrap().fill(1.0);
        up.update().unwrap();
        ps.table_clock(w).unwrap();
    }
    let r = ps.read_keys(&keys(w, 0..2), Slack::BSP).unwrap();
    assert!(r.as_slice().unwrap().iter().all(|v| *v == 3.0));
}

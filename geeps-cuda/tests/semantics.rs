//! The engine's semantic suite, run on every device: always on the host
//! device, and on the GPU when one is present (skipped with the probe's
//! reason otherwise). Same scenarios as the workspace's `tests/basics.rs` and
//! `tests/placement.rs`, with buffer contents moved through the device (a GPU
//! buffer is not a host slice), and on a GPU the numbers must equal the host
//! device's bit for bit.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use geeps_core::{keys, Config, Error, Geeps, InProcessCluster, Plan, RowKey, Slack, Stats, TableKind};
use geeps_testkit::{assert_same_bits, backends, Backend, Io};

fn config(row_width: usize, device_memory: usize) -> Config {
    Config::default()
        .with_row_width(row_width)
        .with_device_memory(device_memory)
        .with_wait_deadline(Duration::from_secs(30))
}

fn build(b: Backend, config: Config) -> (geeps_core::GeepsBuilder, Io) {
    let dev = b.device(config.device_memory);
    let io = Io::new(&dev);
    let mut builder = Geeps::builder(config);
    builder.device(dev);
    (builder, io)
}

#[test]
fn recorded_iterations_accumulate_updates_and_keep_local_data() {
    for b in backends("recorded_iterations_accumulate_updates_and_keep_local_data") {
        let (mut builder, io) = build(b, config(4, 1 << 20));
        let w = builder.parameter_table("w", 8);
        let act = builder.local_table("act", 2);
        let ps = builder.build().unwrap();
        let (wk, ak) = (keys(w, 0..8), keys(act, 0..2));
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
            assert_eq!(read.as_slice().is_ok(), b == Backend::Host, "{b:?}: host slices only where addressable");
            let v = io.get(read.device_ptr(), read.len());
            assert!(v.iter().all(|x| *x == it as f32), "{b:?} iteration {it}: {v:?}");
            let local = ps.local_access(l).unwrap();
            let lv = io.get(local.device_ptr(), local.len());
            assert!(lv.iter().all(|x| *x == it as f32), "{b:?} iteration {it}: local {lv:?}");
            io.set(local.device_ptr(), &lv.iter().map(|x| x + 1.0).collect::<Vec<_>>());
            let up = ps.pre_update(u).unwrap();
            assert!(io.get(up.device_ptr(), up.len()).iter().all(|x| *x == 0.0), "{b:?}: update buffer not zeroed");
            io.fill(up.device_ptr(), up.len(), 1.0);
            up.update().unwrap();
            local.post().unwrap();
            read.post().unwrap();
            ps.table_clock(w).unwrap();
        }
        let stats = ps.stats();
        assert_eq!(stats.slow_path_calls, 0, "{b:?}: {stats}");
        assert_eq!(stats.resyncs, 0, "{b:?}: {stats}");
        assert!(stats.prefetch_hits >= 29, "{b:?}: {stats}");
        ps.shutdown().unwrap();
    }
}

#[test]
fn keyed_calls_without_recording() {
    for b in backends("keyed_calls_without_recording") {
        let (mut builder, io) = build(b, config(4, 1 << 20));
        let w = builder.parameter_table("w", 3);
        let ps = builder.build().unwrap();
        assert!(matches!(ps.read_keys(&keys(w, 0..3), Slack::BSP), Err(Error::InvalidState { .. })));
        ps.finish_virtual_iteration().unwrap();
        for _ in 0..3 {
            let up = ps.pre_update_keys(&[RowKey::new(w, 1)]).unwrap();
            io.fill(up.device_ptr(), up.len(), 2.0);
            up.update().unwrap();
            ps.clock().unwrap();
        }
        let r = ps.read_keys(&keys(w, 0..3), Slack::BSP).unwrap();
        let s = io.get(r.device_ptr(), r.len());
        assert_eq!(&s[0..4], &[0.0; 4], "{b:?}");
        assert_eq!(&s[4..8], &[6.0; 4], "{b:?}");
        assert_eq!(&s[8..12], &[0.0; 4], "{b:?}");
        assert!(ps.stats().slow_path_calls >= 4, "{b:?}");
    }
}

#[test]
fn bsp_workers_see_each_others_updates() {
    for b in backends("bsp_workers_see_each_others_updates") {
        let workers = 4;
        let cluster = InProcessCluster::new(workers).unwrap();
        // Workers start iterating together: a worker that has not joined yet
        // does not hold back the data age, so a late joiner could read
        // fresher rows than the exact counts below expect.
        let joined = Arc::new(Barrier::new(workers));
        let handles: Vec<_> = (0..workers)
            .map(|rank| {
                let t = cluster.transport(rank).unwrap();
                let joined = joined.clone();
                std::thread::spawn(move || {
                    let (mut builder, io) = build(b, config(4, 1 << 20));
                    let w = builder.parameter_table("w", 5);
                    builder.transport(t);
                    let ps = builder.build().unwrap();
                    let k = keys(w, 0..5);
                    let r = ps.virtual_read(&k, Slack::BSP).unwrap();
                    let u = ps.virtual_pre_update(&k).unwrap();
                    ps.virtual_update(u).unwrap();
                    ps.virtual_post_read(r).unwrap();
                    ps.virtual_table_clock(w).unwrap();
                    ps.finish_virtual_iteration().unwrap();
                    joined.wait();
                    for c in 0..20u32 {
                        let read = ps.read(r).unwrap();
                        // Each worker adds (rank + 1) per clock: after c clocks, c * (1+2+3+4).
                        let v = io.get(read.device_ptr(), read.len());
                        assert!(v.iter().all(|x| *x == (c * 10) as f32), "{b:?} rank {rank} clock {c}: {v:?}");
                        let up = ps.pre_update(u).unwrap();
                        io.fill(up.device_ptr(), up.len(), (rank + 1) as f32);
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
            assert_eq!(stats.slow_path_calls, 0, "{b:?}: {stats}");
        }
    }
}

const WIDTH: usize = 8;

/// A two-layer pipeline (forward reads p0 and p1 with local activations,
/// backward updates both) under `budget`. Returns every value read.
fn train(b: Backend, budget: usize, iterations: usize) -> (Vec<f32>, Plan, Stats) {
    let (mut builder, io) = build(b, config(WIDTH, budget));
    let p0 = builder.parameter_table("p0", 16);
    let p1 = builder.parameter_table("p1", 8);
    let act = builder.local_table("act", 12);
    let ps = builder.build().unwrap();
    let (k0, k1) = (keys(p0, 0..16), keys(p1, 0..8));
    let (input, h1, h2) = (keys(act, 0..4), keys(act, 4..8), keys(act, 8..12));

    let f0 = ps.virtual_read(&k0, Slack::BSP).unwrap();
    let fi = ps.virtual_local_access(&input, false).unwrap();
    let fh1 = ps.virtual_local_access(&h1, false).unwrap();
    ps.virtual_post_local_access(fi, true).unwrap();
    ps.virtual_post_read(f0).unwrap();
    let f1 = ps.virtual_read(&k1, Slack::BSP).unwrap();
    let fh2 = ps.virtual_local_access(&h2, false).unwrap();
    ps.virtual_post_local_access(fh1, true).unwrap();
    ps.virtual_post_read(f1).unwrap();
    ps.virtual_post_local_access(fh2, true).unwrap();
    let b1 = ps.virtual_read(&k1, Slack::BSP).unwrap();
    let bh2 = ps.virtual_local_access(&h2, true).unwrap();
    let u1 = ps.virtual_pre_update(&k1).unwrap();
    ps.virtual_update(u1).unwrap();
    ps.virtual_post_local_access(bh2, false).unwrap();
    ps.virtual_post_read(b1).unwrap();
    ps.virtual_table_clock(p1).unwrap();
    let b0 = ps.virtual_read(&k0, Slack::BSP).unwrap();
    let bh1 = ps.virtual_local_access(&h1, true).unwrap();
    let u0 = ps.virtual_pre_update(&k0).unwrap();
    ps.virtual_update(u0).unwrap();
    ps.virtual_post_local_access(bh1, false).unwrap();
    ps.virtual_post_read(b0).unwrap();
    ps.virtual_table_clock(p0).unwrap();
    ps.finish_virtual_iteration().unwrap();

    let mut seen = Vec::new();
    for it in 0..iterations {
        let w0 = ps.read(f0).unwrap();
        let x = ps.local_access(fi).unwrap();
        let xs: Vec<f32> = (0..x.len()).map(|i| (i + it) as f32 * 0.01).collect();
        io.set(x.device_ptr(), &xs);
        let a1 = ps.local_access(fh1).unwrap();
        let w0v = io.get(w0.device_ptr(), w0.len());
        let mean0: f32 = w0v.iter().sum::<f32>() / 128.0;
        let h1v: Vec<f32> = xs.iter().map(|x| x + mean0).collect();
        io.set(a1.device_ptr(), &h1v);
        seen.extend_from_slice(&w0v);
        x.post().unwrap();
        w0.post().unwrap();
        let w1 = ps.read(f1).unwrap();
        let a2 = ps.local_access(fh2).unwrap();
        let w1v = io.get(w1.device_ptr(), w1.len());
        let mean1: f32 = w1v.iter().sum::<f32>() / 64.0;
        io.set(a2.device_ptr(), &h1v.iter().map(|x| 0.5 * x + mean1).collect::<Vec<_>>());
        seen.extend_from_slice(&w1v);
        a1.post().unwrap();
        w1.post().unwrap();
        a2.post().unwrap();

        let w1 = ps.read(b1).unwrap();
        let a2 = ps.local_access(bh2).unwrap();
        let d1 = ps.pre_update(u1).unwrap();
        let g = io.get(a2.device_ptr(), a2.len());
        io.set(d1.device_ptr(), &(0..d1.len()).map(|i| -0.1 * g[i % g.len()]).collect::<Vec<_>>());
        d1.update().unwrap();
        a2.post().unwrap();
        w1.post().unwrap();
        ps.table_clock(p1).unwrap();
        let w0 = ps.read(b0).unwrap();
        let a1 = ps.local_access(bh1).unwrap();
        let d0 = ps.pre_update(u0).unwrap();
        let g = io.get(a1.device_ptr(), a1.len());
        io.set(d0.device_ptr(), &(0..d0.len()).map(|i| 0.05 * g[i % g.len()]).collect::<Vec<_>>());
        d0.update().unwrap();
        a1.post().unwrap();
        w0.post().unwrap();
        ps.table_clock(p0).unwrap();
    }
    (seen, ps.plan().unwrap(), ps.stats())
}

#[test]
fn results_do_not_depend_on_the_budget_or_the_device() {
    let row = WIDTH * 4;
    // Smallest accepted budget: one peak with every activation copied.
    let peak0 = (16 + 16 + 4) * row;
    let (reference, _, _) = train(Backend::Host, 1 << 20, 12);
    for b in backends("results_do_not_depend_on_the_budget_or_the_device") {
        let (roomy_seen, roomy, stats) = train(b, 1 << 20, 12);
        assert!(roomy.double_buffered, "{b:?}: {roomy}");
        assert!(roomy.tables.iter().all(|t| t.rows_on_host == 0), "{b:?}: {roomy}");
        assert_eq!(stats.slow_path_calls, 0, "{b:?}: {stats}");
        assert_eq!(roomy.peak_bytes, 32 * row, "{b:?}");
        assert_same_bits(&roomy_seen, &reference, &format!("{b:?}: everything-on-device run vs the host device's"));

        let (small_seen, small, small_stats) = train(b, peak0, 12);
        assert!(!small.double_buffered, "{b:?}: {small}");
        assert!(small.tables.iter().all(|t| t.rows_on_device == 0), "{b:?}: {small}");
        assert!(small_stats.bytes_host_to_device > 0, "{b:?}");
        assert_same_bits(&small_seen, &reference, &format!("{b:?}: swapped run"));

        let (mid_seen, mid, _) = train(b, 2 * peak0 + 12 * row, 12);
        assert!(mid.double_buffered, "{b:?}: {mid}");
        let local_dev = mid.tables.iter().find(|t| t.kind == TableKind::Local).unwrap().rows_on_device;
        assert!(local_dev > 0, "{b:?}: {mid}");
        assert!(mid.tables.iter().any(|t| t.rows_on_host > 0), "{b:?}: {mid}");
        assert_same_bits(&mid_seen, &reference, &format!("{b:?}: partly swapped run"));
    }
}

#[test]
fn out_of_order_and_unrecorded_calls_stay_correct() {
    for b in backends("out_of_order_and_unrecorded_calls_stay_correct") {
        let (mut builder, io) = build(b, config(WIDTH, 1 << 20));
        let p0 = builder.parameter_table("p0", 4);
        let p1 = builder.parameter_table("p1", 4);
        let ps = builder.build().unwrap();
        let (k0, k1) = (keys(p0, 0..4), keys(p1, 0..4));
        let r0 = ps.virtual_read(&k0, Slack::BSP).unwrap();
        let r1 = ps.virtual_read(&k1, Slack::BSP).unwrap();
        let u0 = ps.virtual_pre_update(&k0).unwrap();
        let u1 = ps.virtual_pre_update(&k1).unwrap();
        ps.virtual_update(u0).unwrap();
        ps.virtual_update(u1).unwrap();
        ps.virtual_post_read(r1).unwrap();
        ps.virtual_post_read(r0).unwrap();
        ps.virtual_clock().unwrap();
        ps.finish_virtual_iteration().unwrap();

        let mut expected = [0.0f32; 2];
        for it in 0..12 {
            // Every third iteration: reversed order, an extra keyed update,
            // an extra clock on p1 only.
            let odd = it % 3 == 1;
            let (a, c) = if odd {
                (ps.read(r1).unwrap(), ps.read(r0).unwrap())
            } else {
                (ps.read(r0).unwrap(), ps.read(r1).unwrap())
            };
            let (first_a, first_c) = (io.get(a.device_ptr(), 1)[0], io.get(c.device_ptr(), 1)[0]);
            let (v0, v1) = if odd { (first_c, first_a) } else { (first_a, first_c) };
            assert_eq!([v0, v1], expected, "{b:?} iteration {it}");
            let d0 = ps.pre_update(u0).unwrap();
            io.fill(d0.device_ptr(), d0.len(), 1.0);
            let d1 = ps.pre_update(u1).unwrap();
            io.fill(d1.device_ptr(), d1.len(), 2.0);
            d0.update().unwrap();
            d1.update().unwrap();
            expected[0] += 1.0;
            expected[1] += 2.0;
            if odd {
                let extra = ps.pre_update_keys(&k1).unwrap();
                io.fill(extra.device_ptr(), extra.len(), 10.0);
                extra.update().unwrap();
                expected[1] += 10.0;
            }
            drop(a);
            drop(c);
            ps.clock().unwrap();
            if odd {
                ps.table_clock(p1).unwrap();
            }
        }
        let stats = ps.stats();
        assert!(stats.resyncs > 0, "{b:?}: {stats}");
        assert!(stats.prefetch_hits > 0, "{b:?}: {stats}");
    }
}

#[test]
fn fetch_and_save_flags_skip_their_copies() {
    for b in backends("fetch_and_save_flags_skip_their_copies") {
        // A budget of one 4-row buffer: the local rows stay on the host.
        let (mut builder, io) = build(b, config(WIDTH, 4 * WIDTH * 4));
        let act = builder.local_table("act", 4);
        let ps = builder.build().unwrap();
        ps.finish_virtual_iteration().unwrap();
        let k = keys(act, 0..4);
        let l = ps.local_access_keys(&k, true).unwrap();
        io.fill(l.device_ptr(), l.len(), 5.0);
        l.post().unwrap();
        let l = ps.local_access_keys(&k, true).unwrap();
        assert!(io.get(l.device_ptr(), l.len()).iter().all(|v| *v == 5.0), "{b:?}");
        io.fill(l.device_ptr(), l.len(), 7.0);
        l.post_with(false).unwrap();
        let l = ps.local_access_keys(&k, true).unwrap();
        assert!(io.get(l.device_ptr(), l.len()).iter().all(|v| *v == 5.0), "{b:?}: save = false must not store");
        l.post_with(false).unwrap();
        let before = ps.stats();
        let l = ps.local_access_keys(&k, false).unwrap();
        l.post_with(false).unwrap();
        let after = ps.stats();
        assert_eq!(after.bytes_host_to_device, before.bytes_host_to_device, "{b:?}: fetch = false copies nothing in");
        assert_eq!(after.bytes_device_to_host, before.bytes_device_to_host, "{b:?}: save = false copies nothing out");
        assert_eq!(ps.plan().unwrap().local_host_bytes, 4 * WIDTH * 4, "{b:?}");
    }
}

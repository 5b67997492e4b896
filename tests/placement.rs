//! Placement and swapping: the same training gives the same numbers whatever
//! the device budget, from "everything fits" down to the smallest budget the
//! planner accepts; and calls out of the recorded order stay correct.

use std::time::Duration;

use geeps::{keys, Config, Geeps, Plan, Slack, Stats, TableKind};

const WIDTH: usize = 8;

/// A two-layer pipeline: forward reads p0 and p1 with local activations,
/// backward updates both. Returns every value read, the plan and the stats.
fn train(budget: usize, iterations: usize) -> (Vec<f32>, Plan, Stats) {
    let mut b = Geeps::builder(
        Config::default().with_row_width(WIDTH).with_device_memory(budget).with_wait_deadline(Duration::from_secs(20)),
    );
    let p0 = b.parameter_table("p0", 16);
    let p1 = b.parameter_table("p1", 8);
    let act = b.local_table("act", 12);
    let ps = b.build().unwrap();
    let (k0, k1) = (keys(p0, 0..16), keys(p1, 0..8));
    let (input, h1, h2) = (keys(act, 0..4), keys(act, 4..8), keys(act, 8..12));

    // Record forward then backward.
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
        let mut x = ps.local_access(fi).unwrap();
        x.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, v)| *v = (i + it) as f32 * 0.01);
        let mut a1 = ps.local_access(fh1).unwrap();
        let mean0: f32 = w0.as_slice().unwrap().iter().sum::<f32>() / 128.0;
        let xs = x.as_slice().unwrap().to_vec();
        a1.as_mut_slice().unwrap().iter_mut().zip(&xs).for_each(|(h, x)| *h = x + mean0);
        seen.extend_from_slice(w0.as_slice().unwrap());
        x.post().unwrap();
        w0.post().unwrap();
        let w1 = ps.read(f1).unwrap();
        let mut a2 = ps.local_access(fh2).unwrap();
        let mean1: f32 = w1.as_slice().unwrap().iter().sum::<f32>() / 64.0;
        let h1v = a1.as_slice().unwrap().to_vec();
        a2.as_mut_slice().unwrap().iter_mut().zip(&h1v).for_each(|(h, x)| *h = 0.5 * x + mean1);
        seen.extend_from_slice(w1.as_slice().unwrap());
        a1.post().unwrap();
        w1.post().unwrap();
        a2.post().unwrap();

        let w1 = ps.read(b1).unwrap();
        let a2 = ps.local_access(bh2).unwrap();
        let mut d1 = ps.pre_update(u1).unwrap();
        let g: Vec<f32> = a2.as_slice().unwrap().to_vec();
        d1.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, d)| *d = -0.1 * g[i % g.len()]);
        d1.update().unwrap();
        a2.post().unwrap();
        w1.post().unwrap();
        ps.table_clock(p1).unwrap();
        let w0 = ps.read(b0).unwrap();
        let a1 = ps.local_access(bh1).unwrap();
        let mut d0 = ps.pre_update(u0).unwrap();
        let g: Vec<f32> = a1.as_slice().unwrap().to_vec();
        d0.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, d)| *d = 0.05 * g[i % g.len()]);
        d0.update().unwrap();
        a1.post().unwrap();
        w0.post().unwrap();
        ps.table_clock(p0).unwrap();
    }
    let plan = ps.plan().unwrap();
    let stats = ps.stats();
    (seen, plan, stats)
}

#[test]
fn results_do_not_depend_on_the_budget() {
    let (reference, roomy, stats) = train(1 << 20, 12);
    assert!(roomy.double_buffered);
    assert!(roomy.tables.iter().all(|t| t.rows_on_host == 0), "{roomy}");
    assert_eq!(stats.slow_path_calls, 0, "{stats}");
    // Everything-fits peak: one 16-row read plus one 16-row update (activations in place).
    let row = WIDTH * 4;
    assert_eq!(roomy.peak_bytes, 32 * row);

    // Smallest accepted budget: one peak with every activation copied.
    let peak0 = (16 + 16 + 4) * row;
    let (small_seen, small, small_stats) = train(peak0, 12);
    assert!(!small.double_buffered, "{small}");
    assert!(small.tables.iter().all(|t| t.rows_on_device == 0), "{small}");
    assert!(small_stats.bytes_host_to_device > 0);
    assert_eq!(small_seen, reference, "swapped run differs");

    // In between: some local data pinned, some parameters on the host.
    let (mid_seen, mid, _) = train(2 * peak0 + 12 * row, 12);
    assert!(mid.double_buffered, "{mid}");
    let local_dev = mid.tables.iter().find(|t| t.kind == TableKind::Local).unwrap().rows_on_device;
    assert!(local_dev > 0, "{mid}");
    assert!(mid.tables.iter().any(|t| t.rows_on_host > 0), "{mid}");
    assert_eq!(mid_seen, reference, "partly swapped run differs");
}

#[test]
fn out_of_order_and_unrecorded_calls_stay_correct() {
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH));
    let p0 = b.parameter_table("p0", 4);
    let p1 = b.parameter_table("p1", 4);
    let ps = b.build().unwrap();
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
        // Every third iteration: reversed order, an extra keyed update, an
        // extra clock on p1 only.
        let odd = it % 3 == 1;
        let (a, b) = if odd {
            (ps.read(r1).unwrap(), ps.read(r0).unwrap())
        } else {
            (ps.read(r0).unwrap(), ps.read(r1).unwrap())
        };
        let (v0, v1) = if odd {
            (b.as_slice().unwrap()[0], a.as_slice().unwrap()[0])
        } else {
            (a.as_slice().unwrap()[0], b.as_slice().unwrap()[0])
        };
        assert_eq!([v0, v1], expected, "iteration {it}");
        let mut d0 = ps.pre_update(u0).unwrap();
        d0.as_mut_slice().unwrap().fill(1.0);
        let mut d1 = ps.pre_update(u1).unwrap();
        d1.as_mut_slice().unwrap().fill(2.0);
        d0.update().unwrap();
        d1.update().unwrap();
        expected[0] += 1.0;
        expected[1] += 2.0;
        if odd {
            let mut extra = ps.pre_update_keys(&k1).unwrap();
            extra.as_mut_slice().unwrap().fill(10.0);
            extra.update().unwrap();
            expected[1] += 10.0;
        }
        drop(a);
        drop(b);
        ps.clock().unwrap();
        if odd {
            ps.table_clock(p1).unwrap();
        }
    }
    let stats = ps.stats();
    assert!(stats.resyncs > 0, "{stats}");
    assert!(stats.prefetch_hits > 0, "{stats}");
}

#[test]
fn fetch_and_save_flags_skip_their_copies() {
    // A budget of one 4-row buffer: the local rows stay on the host.
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_device_memory(4 * WIDTH * 4));
    let act = b.local_table("act", 4);
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    let k = keys(act, 0..4);
    let mut l = ps.local_access_keys(&k, true).unwrap();
    l.as_mut_slice().unwrap().fill(5.0);
    l.post().unwrap();
    let mut l = ps.local_access_keys(&k, true).unwrap();
    assert!(l.as_slice().unwrap().iter().all(|v| *v == 5.0));
    l.as_mut_slice().unwrap().fill(7.0);
    l.post_with(false).unwrap();
    let l = ps.local_access_keys(&k, true).unwrap();
    assert!(l.as_slice().unwrap().iter().all(|v| *v == 5.0), "save = false must not store");
    l.post_with(false).unwrap();
    let before = ps.stats();
    let l = ps.local_access_keys(&k, false).unwrap();
    l.post_with(false).unwrap();
    let after = ps.stats();
    assert_eq!(after.bytes_host_to_device, before.bytes_host_to_device, "fetch = false copies nothing in");
    assert_eq!(after.bytes_device_to_host, before.bytes_device_to_host, "save = false copies nothing out");
    assert_eq!(ps.plan().unwrap().local_host_bytes, 4 * WIDTH * 4);
}

//! Placement and swapping: the same training gives the same numbers whatever
//! the device budget, from "everything fits" down to the smallest budget the
//! planner accepts; and calls out of the recorded order stay correct. On
//! every device (`geeps_testkit::device_test!`), the CUDA device's numbers
//! equal the host device's bit for bit.

use std::time::Duration;

use geeps::{keys, Config, Plan, Slack, Stats, TableKind};
use geeps_testkit::{assert_same_bits, device_test, Backend};

const WIDTH: usize = 8;

/// A two-layer pipeline: forward reads p0 and p1 with local activations,
/// backward updates both. Returns every value read, the plan and the stats.
fn train(backend: Backend, budget: usize, iterations: usize) -> (Vec<f32>, Plan, Stats) {
    let (mut b, fx) = backend.builder(
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
        let x = ps.local_access(fi).unwrap();
        let xs: Vec<f32> = (0..x.len()).map(|i| (i + it) as f32 * 0.01).collect();
        fx.set(&x, &xs);
        let a1 = ps.local_access(fh1).unwrap();
        let w0v = fx.get(&w0);
        let mean0: f32 = w0v.iter().sum::<f32>() / 128.0;
        fx.set(&a1, &xs.iter().map(|x| x + mean0).collect::<Vec<_>>());
        seen.extend_from_slice(&w0v);
        x.post().unwrap();
        w0.post().unwrap();
        let w1 = ps.read(f1).unwrap();
        let a2 = ps.local_access(fh2).unwrap();
        let w1v = fx.get(&w1);
        let mean1: f32 = w1v.iter().sum::<f32>() / 64.0;
        let h1v = fx.get(&a1);
        fx.set(&a2, &h1v.iter().map(|x| 0.5 * x + mean1).collect::<Vec<_>>());
        seen.extend_from_slice(&w1v);
        a1.post().unwrap();
        w1.post().unwrap();
        a2.post().unwrap();

        let w1 = ps.read(b1).unwrap();
        let a2 = ps.local_access(bh2).unwrap();
        let d1 = ps.pre_update(u1).unwrap();
        let g = fx.get(&a2);
        fx.set(&d1, &(0..d1.len()).map(|i| -0.1 * g[i % g.len()]).collect::<Vec<_>>());
        d1.update().unwrap();
        a2.post().unwrap();
        w1.post().unwrap();
        ps.table_clock(p1).unwrap();
        let w0 = ps.read(b0).unwrap();
        let a1 = ps.local_access(bh1).unwrap();
        let d0 = ps.pre_update(u0).unwrap();
        let g = fx.get(&a1);
        fx.set(&d0, &(0..d0.len()).map(|i| 0.05 * g[i % g.len()]).collect::<Vec<_>>());
        d0.update().unwrap();
        a1.post().unwrap();
        w0.post().unwrap();
        ps.table_clock(p0).unwrap();
    }
    let plan = ps.plan().unwrap();
    let stats = ps.stats();
    (seen, plan, stats)
}

// Every read value of the three runs must be the same bits, and on the CUDA
// device the same bits as on the host device.
device_test!(results_do_not_depend_on_the_budget, |backend| -> Vec<f32> {
    let (reference, roomy, stats) = train(backend, 1 << 20, 12);
    assert!(roomy.double_buffered);
    assert!(roomy.tables.iter().all(|t| t.rows_on_host == 0), "{roomy}");
    assert_eq!(stats.slow_path_calls, 0, "{stats}");
    // Everything-fits peak: one 16-row read plus one 16-row update (activations in place).
    let row = WIDTH * 4;
    assert_eq!(roomy.peak_bytes, 32 * row);

    // Smallest accepted budget: one peak with every activation copied.
    let peak0 = (16 + 16 + 4) * row;
    let (small_seen, small, small_stats) = train(backend, peak0, 12);
    assert!(!small.double_buffered, "{small}");
    assert!(small.tables.iter().all(|t| t.rows_on_device == 0), "{small}");
    assert!(small_stats.bytes_host_to_device > 0);
    assert_same_bits(&small_seen, &reference, "swapped run differs");

    // In between: some local data pinned, some parameters on the host.
    let (mid_seen, mid, _) = train(backend, 2 * peak0 + 12 * row, 12);
    assert!(mid.double_buffered, "{mid}");
    let local_dev = mid.tables.iter().find(|t| t.kind == TableKind::Local).unwrap().rows_on_device;
    assert!(local_dev > 0, "{mid}");
    assert!(mid.tables.iter().any(|t| t.rows_on_host > 0), "{mid}");
    assert_same_bits(&mid_seen, &reference, "partly swapped run differs");
    reference
});

device_test!(out_of_order_and_unrecorded_calls_stay_correct, |backend| -> Vec<f32> {
    let (mut b, fx) = backend.builder(Config::default().with_row_width(WIDTH));
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
    let mut seen = Vec::new();
    for it in 0..12 {
        // Every third iteration: reversed order, an extra keyed update, an
        // extra clock on p1 only.
        let odd = it % 3 == 1;
        let (a, b) = if odd {
            (ps.read(r1).unwrap(), ps.read(r0).unwrap())
        } else {
            (ps.read(r0).unwrap(), ps.read(r1).unwrap())
        };
        let (va, vb) = (fx.get(&a), fx.get(&b));
        let (v0, v1) = if odd { (&vb, &va) } else { (&va, &vb) };
        assert!(v0.iter().all(|v| *v == expected[0]), "iteration {it}: p0 {v0:?}, expected {}", expected[0]);
        assert!(v1.iter().all(|v| *v == expected[1]), "iteration {it}: p1 {v1:?}, expected {}", expected[1]);
        seen.extend_from_slice(v0);
        seen.extend_from_slice(v1);
        let d0 = ps.pre_update(u0).unwrap();
        fx.fill(&d0, 1.0);
        let d1 = ps.pre_update(u1).unwrap();
        fx.fill(&d1, 2.0);
        d0.update().unwrap();
        d1.update().unwrap();
        expected[0] += 1.0;
        expected[1] += 2.0;
        if odd {
            let extra = ps.pre_update_keys(&k1).unwrap();
            fx.fill(&extra, 10.0);
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
    seen
});

device_test!(fetch_and_save_flags_skip_their_copies, |backend| {
    // A budget of one 4-row buffer: the local rows stay on the host.
    let (mut b, fx) = backend.builder(Config::default().with_row_width(WIDTH).with_device_memory(4 * WIDTH * 4));
    let act = b.local_table("act", 4);
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    let k = keys(act, 0..4);
    let l = ps.local_access_keys(&k, true).unwrap();
    fx.fill(&l, 5.0);
    l.post().unwrap();
    let l = ps.local_access_keys(&k, true).unwrap();
    assert!(fx.get(&l).iter().all(|v| *v == 5.0));
    fx.fill(&l, 7.0);
    l.post_with(false).unwrap();
    let l = ps.local_access_keys(&k, true).unwrap();
    assert!(fx.get(&l).iter().all(|v| *v == 5.0), "save = false must not store");
    l.post_with(false).unwrap();
    let before = ps.stats();
    let l = ps.local_access_keys(&k, false).unwrap();
    l.post_with(false).unwrap();
    let after = ps.stats();
    assert_eq!(after.bytes_host_to_device, before.bytes_host_to_device, "fetch = false copies nothing in");
    assert_eq!(after.bytes_device_to_host, before.bytes_device_to_host, "save = false copies nothing out");
    assert_eq!(ps.plan().unwrap().local_host_bytes, 4 * WIDTH * 4);
});

//! Hand-overs: a local buffer posted with `save = true` serves the next
//! access of the same rows directly, and its save travels with it. These
//! tests check that the data is always what a save-then-fetch would give: at
//! the target, at later accesses that read the store, and when the
//! application leaves the recorded order while a hand-over is pending or held.
//! On every device (`geeps_testkit::device_test!`): buffer contents move
//! through the device's own copies, and a hand-over is seen as the same
//! device address.

use std::time::Duration;

use geeps::{keys, Config, DevicePtr, Geeps, Handle, RowKey};
use geeps_testkit::{device_test, Backend, Fixture};

const WIDTH: usize = 8;
const ROWS: u32 = 4;
/// Bytes of one blob.
const BLOB: usize = ROWS as usize * WIDTH * 4;

struct Net {
    ps: Geeps,
    fx: Fixture,
    a: Vec<RowKey>,
    /// layer 1 writes A; layer 2 reads A, writes B; layer 3 reads B; then A is read again.
    write_a: Handle,
    read_a: Handle,
    write_b: Handle,
    read_b: Handle,
    reread_a: Handle,
}

/// An instance with one local table of two blobs, A and B, on a device of
/// `backend`; their keys; the fixture to look into its buffers.
fn instance(backend: Backend, budget: usize) -> (Geeps, Vec<RowKey>, Vec<RowKey>, Fixture) {
    let (mut b, fx) = backend.builder(
        Config::default().with_row_width(WIDTH).with_device_memory(budget).with_wait_deadline(Duration::from_secs(10)),
    );
    let act = b.local_table("act", 2 * ROWS);
    let ps = b.build().unwrap();
    let (a, bk) = (keys(act, 0..ROWS), keys(act, ROWS..2 * ROWS));
    (ps, a, bk, fx)
}

fn net(backend: Backend, budget: usize) -> Net {
    let (ps, a, bk, fx) = instance(backend, budget);
    let write_a = ps.virtual_local_access(&a, false).unwrap();
    ps.virtual_post_local_access(write_a, true).unwrap();
    let read_a = ps.virtual_local_access(&a, true).unwrap();
    let write_b = ps.virtual_local_access(&bk, false).unwrap();
    ps.virtual_post_local_access(write_b, true).unwrap();
    ps.virtual_post_local_access(read_a, false).unwrap();
    let read_b = ps.virtual_local_access(&bk, true).unwrap();
    ps.virtual_post_local_access(read_b, false).unwrap();
    let reread_a = ps.virtual_local_access(&a, true).unwrap();
    ps.virtual_post_local_access(reread_a, false).unwrap();
    ps.finish_virtual_iteration().unwrap();
    Net { ps, fx, a, write_a, read_a, write_b, read_b, reread_a }
}

fn values(it: usize, blob: usize) -> Vec<f32> {
    (0..ROWS as usize * WIDTH).map(|i| (it * 1000 + blob * 100 + i) as f32).collect()
}

/// Writes blob A of iteration `it` and posts it (a hand-over when planned);
/// returns the buffer's address.
fn write_a(n: &Net, it: usize) -> DevicePtr {
    let w = n.ps.local_access(n.write_a).unwrap();
    n.fx.set(&w, &values(it, 0));
    let at = w.device_ptr();
    w.post().unwrap();
    at
}

/// The rest of the iteration after `write_a`, checking every value read;
/// `handed` is the address layer 2 must get A at, when handed over.
fn rest(n: &Net, it: usize, handed: Option<DevicePtr>) {
    let r = n.ps.local_access(n.read_a).unwrap();
    assert_eq!(n.fx.get(&r), values(it, 0), "layer 2 reads A of iteration {it}");
    if let Some(at) = handed {
        assert_eq!(r.device_ptr(), at, "iteration {it}: handed over, not copied");
    }
    let w = n.ps.local_access(n.write_b).unwrap();
    n.fx.set(&w, &values(it, 1));
    w.post().unwrap();
    r.post().unwrap();
    let r = n.ps.local_access(n.read_b).unwrap();
    assert_eq!(n.fx.get(&r), values(it, 1), "layer 3 reads B of iteration {it}");
    r.post().unwrap();
    let r = n.ps.local_access(n.reread_a).unwrap();
    assert_eq!(n.fx.get(&r), values(it, 0), "A is read back from the store in iteration {it}");
    r.post().unwrap();
}

device_test!(posted_blobs_are_handed_over_and_saved_at_the_end_of_the_chain, |backend| {
    // Below two peaks (A and B held at once) and too tight to pin a blob
    // beside one and a half peaks: nothing pinned, single-buffered.
    let n = net(backend, 2 * BLOB + BLOB / 4);
    let plan = n.ps.plan().unwrap();
    assert_eq!(plan.handovers, 2, "{plan}");
    assert_eq!(plan.local_device_bytes, 0, "{plan}");
    for it in 0..5 {
        let at = write_a(&n, it);
        rest(&n, it, Some(at));
    }
    let stats = n.ps.stats();
    assert_eq!(stats.handovers, 10, "{stats}");
    assert_eq!(stats.resyncs, 0, "{stats}");
});

device_test!(everything_fits_serves_in_place_and_hands_nothing_over, |backend| {
    let n = net(backend, 1 << 20);
    assert_eq!(n.ps.plan().unwrap().handovers, 0);
    for it in 0..3 {
        write_a(&n, it);
        rest(&n, it, None);
    }
});

device_test!(leaving_the_order_with_a_hand_over_pending_saves_it_first, |backend| {
    let n = net(backend, 2 * BLOB + BLOB / 4);
    for it in 0..3 {
        write_a(&n, it);
        // Off the recorded order: a keyed access of A must see the posted data.
        let keyed = n.ps.local_access_keys(&n.a, true).unwrap();
        assert_eq!(n.fx.get(&keyed), values(it, 0), "iteration {it}");
        keyed.post_with(false).unwrap();
        rest(&n, it, None);
    }
    let stats = n.ps.stats();
    assert!(stats.resyncs > 0, "{stats}");
});

device_test!(leaving_the_order_while_holding_a_hand_over_saves_it_first, |backend| {
    let n = net(backend, 2 * BLOB + BLOB / 4);
    for it in 0..3 {
        write_a(&n, it);
        let held = n.ps.local_access(n.read_a).unwrap();
        assert_eq!(n.fx.get(&held), values(it, 0));
        let keyed = n.ps.local_access_keys(&n.a, true).unwrap();
        assert_eq!(n.fx.get(&keyed), values(it, 0), "iteration {it}: held hand-over saved");
        keyed.post_with(false).unwrap();
        held.post().unwrap();
        // Whatever happened above, the store has A.
        let again = n.ps.local_access_keys(&n.a, true).unwrap();
        assert_eq!(n.fx.get(&again), values(it, 0), "iteration {it}: after the post");
        again.post_with(false).unwrap();
    }
    // Back in order, hand-overs resume.
    let before = n.ps.stats().handovers;
    for it in 3..6 {
        write_a(&n, it);
        rest(&n, it, None);
    }
    let after = n.ps.stats().handovers;
    assert!(after > before, "hand-overs resume in order: {before} -> {after}");
});

/// Layer 1 writes A and B and posts them; layer 2 reads them and then
/// declares them dead (`discard`), or posts them with `save = false`.
/// Returns the instance and the handles (write A, write B, read A, read B).
fn write_then_read(backend: Backend, discard: bool) -> (Geeps, [Handle; 4], Fixture) {
    let (ps, a, bk, fx) = instance(backend, 2 * BLOB + BLOB / 4);
    let wa = ps.virtual_local_access(&a, false).unwrap();
    let wb = ps.virtual_local_access(&bk, false).unwrap();
    ps.virtual_post_local_access(wa, true).unwrap();
    ps.virtual_post_local_access(wb, true).unwrap();
    let ra = ps.virtual_local_access(&a, true).unwrap();
    let rb = ps.virtual_local_access(&bk, true).unwrap();
    for r in [ra, rb] {
        if discard {
            ps.virtual_discard_local_access(r).unwrap();
        } else {
            ps.virtual_post_local_access(r, false).unwrap();
        }
    }
    ps.finish_virtual_iteration().unwrap();
    (ps, [wa, wb, ra, rb], fx)
}

/// One iteration of `write_then_read`'s recording, checking what is read.
fn write_then_read_iteration(ps: &Geeps, fx: &Fixture, h: [Handle; 4], it: usize) {
    let wa = ps.local_access(h[0]).unwrap();
    let wb = ps.local_access(h[1]).unwrap();
    fx.set(&wa, &values(it, 0));
    fx.set(&wb, &values(it, 1));
    wa.post().unwrap();
    wb.post().unwrap();
    let ra = ps.local_access(h[2]).unwrap();
    let rb = ps.local_access(h[3]).unwrap();
    assert_eq!(fx.get(&ra), values(it, 0), "iteration {it}");
    assert_eq!(fx.get(&rb), values(it, 1), "iteration {it}");
    // Dropping posts as recorded: a discard when recorded as one.
    drop(ra);
    drop(rb);
}

device_test!(a_discarding_chain_end_saves_nothing_and_a_saving_one_does, |backend| {
    for discard in [false, true] {
        let (ps, h, fx) = write_then_read(backend, discard);
        let plan = ps.plan().unwrap();
        assert_eq!(plan.handovers, 2, "{plan}");
        for it in 0..4 {
            write_then_read_iteration(&ps, &fx, h, it);
        }
        let stats = ps.stats();
        assert_eq!(stats.resyncs, 0, "{stats}");
        assert_eq!(stats.handovers, 8, "{stats}");
        // A keyed fetch waits until every save issued so far is stored.
        ps.local_access_keys(&keys(geeps::TableId(0), 0..2 * ROWS), true).unwrap().post_with(false).unwrap();
        let stats = ps.stats();
        if discard {
            assert_eq!(stats.bytes_device_to_host, 0, "nothing saved: {stats}");
        } else {
            assert_eq!(stats.bytes_device_to_host, 8 * BLOB as u64, "two saves per iteration: {stats}");
        }
    }
});

device_test!(leaving_the_order_before_a_discard_still_saves_the_hand_over, |backend| {
    let (ps, h, fx) = write_then_read(backend, true);
    let a = keys(geeps::TableId(0), 0..ROWS);
    for it in 0..3 {
        let wa = ps.local_access(h[0]).unwrap();
        let wb = ps.local_access(h[1]).unwrap();
        fx.set(&wa, &values(it, 0));
        fx.set(&wb, &values(it, 1));
        wa.post().unwrap();
        // Off the order with A handed over and not yet read.
        let keyed = ps.local_access_keys(&a, true).unwrap();
        assert_eq!(fx.get(&keyed), values(it, 0), "iteration {it}");
        keyed.post_with(false).unwrap();
        wb.post().unwrap();
        let ra = ps.local_access(h[2]).unwrap();
        let rb = ps.local_access(h[3]).unwrap();
        assert_eq!(fx.get(&ra), values(it, 0), "iteration {it}");
        assert_eq!(fx.get(&rb), values(it, 1), "iteration {it}");
        ra.discard().unwrap();
        rb.discard().unwrap();
    }
    // Back in the recorded order, nothing else to check than that it runs.
    write_then_read_iteration(&ps, &fx, h, 9);
});

/// Each iteration reads A, with B held beside it, posts both unchanged, and
/// reads A again: the second read is served by the first one's buffer.
/// The store's A holds `values(0, 0)`. Returns the instance, A's keys and the
/// handles (first read of A, read of B, second read of A).
fn read_twice(backend: Backend) -> (Geeps, Vec<RowKey>, [Handle; 3], Fixture) {
    let (ps, a, bk, fx) = instance(backend, 2 * BLOB + BLOB / 4);
    let ra = ps.virtual_local_access(&a, true).unwrap();
    let rb = ps.virtual_local_access(&bk, true).unwrap();
    ps.virtual_post_local_access(rb, false).unwrap();
    ps.virtual_post_local_access(ra, false).unwrap();
    let again = ps.virtual_local_access(&a, true).unwrap();
    ps.virtual_post_local_access(again, false).unwrap();
    ps.finish_virtual_iteration().unwrap();
    let w = ps.local_access_keys(&a, false).unwrap();
    fx.set(&w, &values(0, 0));
    w.post_with(true).unwrap();
    // A keyed fetch waits until the save is stored (and counted).
    ps.local_access_keys(&a, true).unwrap().post_with(false).unwrap();
    (ps, a, [ra, rb, again], fx)
}

device_test!(a_fetched_buffer_posted_unchanged_is_handed_over, |backend| {
    let (ps, _, [ra, rb, again], fx) = read_twice(backend);
    let plan = ps.plan().unwrap();
    assert_eq!((plan.handovers, plan.local_device_bytes), (1, 0), "{plan}");
    let before = ps.stats();
    const ITERATIONS: u64 = 8;
    for it in 0..ITERATIONS {
        let first = ps.local_access(ra).unwrap();
        assert_eq!(fx.get(&first), values(0, 0), "iteration {it}");
        let at = first.device_ptr();
        ps.local_access(rb).unwrap().post().unwrap();
        first.post().unwrap();
        let second = ps.local_access(again).unwrap();
        assert_eq!(fx.get(&second), values(0, 0), "iteration {it}");
        assert_eq!(second.device_ptr(), at, "iteration {it}: handed over, not fetched");
        second.post().unwrap();
    }
    let stats = ps.stats();
    assert_eq!(stats.handovers - before.handovers, ITERATIONS, "{stats}");
    assert_eq!(stats.resyncs, before.resyncs, "{stats}");
    // A and B fetched once an iteration (give or take the allocator's one
    // iteration ahead at either end; without the hand-over, three blobs);
    // nothing saved.
    let blobs = (stats.bytes_host_to_device - before.bytes_host_to_device) / BLOB as u64;
    assert!((2 * ITERATIONS - 2..=2 * ITERATIONS + 2).contains(&blobs), "{blobs} blobs fetched: {stats}");
    assert_eq!(stats.bytes_device_to_host, before.bytes_device_to_host, "{stats}");
});

device_test!(an_unchanged_hand_over_never_hides_a_later_write, |backend| {
    let (ps, a, [ra, rb, again], fx) = read_twice(backend);
    for it in 1..4 {
        // Off the order with A handed over: a keyed write of A must win.
        let first = ps.local_access(ra).unwrap();
        ps.local_access(rb).unwrap().post().unwrap();
        first.post().unwrap();
        let w = ps.local_access_keys(&a, false).unwrap();
        fx.set(&w, &values(it, 0));
        w.post_with(true).unwrap();
        let second = ps.local_access(again).unwrap();
        assert_eq!(fx.get(&second), values(it, 0), "iteration {it}: the keyed write");
        second.post().unwrap();
        // The first read changes A and saves it, against the recording: the
        // second read must see the change.
        let first = ps.local_access(ra).unwrap();
        fx.set(&first, &values(it, 1));
        ps.local_access(rb).unwrap().post().unwrap();
        first.post_with(true).unwrap();
        let second = ps.local_access(again).unwrap();
        assert_eq!(fx.get(&second), values(it, 1), "iteration {it}: the saving post");
        second.post().unwrap();
        // Restore A for the next round.
        let w = ps.local_access_keys(&a, false).unwrap();
        fx.set(&w, &values(0, 0));
        w.post_with(true).unwrap();
    }
});

//! Read-my-writes: a worker's reads see its own updates at once, whether the
//! cached rows already hold them (kept in step, or brought back by a
//! publication) or must catch up from the deltas not yet published — the
//! current clock's accumulator and the clocks still in flight. Updates are
//! added to the outgoing deltas only; the cache takes them lazily, so every
//! mix of updates and reads within and across clocks is checked exactly.

use std::time::Duration;

use geeps::{keys, Config, InProcessCluster, Slack};
use geeps_testkit::device_test;

const ROWS: u32 = 12;
const WIDTH: usize = 3;

// On the host device the cache catches up from the host; on a GPU its
// device part is kept in step on the device.
device_test!(reads_see_own_updates_within_and_across_clocks_exactly, |backend| {
    let cluster = InProcessCluster::new(1).unwrap();
    let transport = cluster.transport(0).unwrap();
    let config =
        Config::default().with_row_width(WIDTH).with_device_memory(1 << 20).with_wait_deadline(Duration::from_secs(20));
    let (mut b, fx) = backend.builder(config);
    let t = b.parameter_table("w", ROWS);
    b.transport(transport);
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();

    let mut want = vec![0f32; ROWS as usize * WIDTH];
    let check = |ps: &geeps::Geeps, want: &[f32], slack: Slack, what: &str| {
        let read = ps.read_keys(&keys(t, 0..ROWS), slack).unwrap();
        assert_eq!(fx.get(&read), want, "{backend:?}: {what}");
        read.post().unwrap();
    };
    for clock in 0..10u32 {
        // Several updates per clock over different rows, with reads between
        // them: the first read catches the cache up, later updates keep it
        // in step, reads after the clock see the deltas still in flight.
        for (step, span) in [(0..ROWS), (clock % 4..ROWS / 2 + clock % 5), (ROWS / 3..ROWS)].into_iter().enumerate() {
            let delta = (clock * 3 + step as u32 + 1) as f32;
            let u = ps.pre_update_keys(&keys(t, span.clone())).unwrap();
            fx.set(&u, &vec![delta; span.len() * WIDTH]);
            u.update().unwrap();
            for r in span {
                want[r as usize * WIDTH..(r as usize + 1) * WIDTH].iter_mut().for_each(|x| *x += delta);
            }
            if (clock + step as u32) % 2 == 0 {
                check(&ps, &want, Slack::Unbounded, &format!("clock {clock}, after update {step}"));
            }
        }
        ps.table_clock(t).unwrap();
        if clock % 3 == 0 {
            check(&ps, &want, Slack::Unbounded, &format!("right after clock {clock}"));
        }
        if clock % 3 == 1 {
            check(&ps, &want, Slack::BSP, &format!("clock {clock} published"));
        }
    }
    check(&ps, &want, Slack::BSP, "at the end");
    ps.shutdown().unwrap();
});

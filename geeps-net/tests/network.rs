//! Workers in separate network endpoints (one thread per rank, real TCP on
//! loopback) train together exactly as in-process workers do.

mod common;

use geeps_core::{keys, Slack};

#[test]
fn bsp_over_tcp_sees_every_update() {
    let world = 3;
    let results = common::run_ranks(world, move |rank, cluster| {
        let (ps, w) = common::instance(cluster.transport(), 10, 16);
        let k = keys(w, 0..10);
        let r = ps.virtual_read(&k, Slack::BSP).unwrap();
        let u = ps.virtual_pre_update(&k).unwrap();
        ps.virtual_update(u).unwrap();
        ps.virtual_post_read(r).unwrap();
        ps.virtual_table_clock(w).unwrap();
        ps.finish_virtual_iteration().unwrap();
        for c in 0..15u32 {
            let read = ps.read(r).unwrap();
            // Ranks add 1, 2, 3 per clock. BSP: every update of clocks < c is
            // in; faster ranks' updates of clock c may be too.
            let floor = (c * 6) as f32;
            let values = read.as_slice().unwrap();
            assert!(
                values.iter().all(|v| *v >= floor && *v <= floor + 6.0),
                "rank {rank} clock {c}: {:?}",
                &values[..4]
            );
            let mut up = ps.pre_update(u).unwrap();
            up.as_mut_slice().unwrap().fill((rank + 1) as f32);
            up.update().unwrap();
            drop(read);
            ps.table_clock(w).unwrap();
        }
        // After everyone's last clock, a BSP read sees exactly the total.
        let total = ps.read_keys(&k, Slack::BSP).unwrap();
        assert!(
            total.as_slice().unwrap().iter().all(|v| *v == 90.0),
            "rank {rank}: {:?}",
            &total.as_slice().unwrap()[..4]
        );
        drop(total);
        let stats = ps.stats();
        ps.shutdown().unwrap();
        stats
    });
    for s in results {
        assert_eq!(s.slow_path_calls, 1, "only the final keyed read: {s}");
    }
}

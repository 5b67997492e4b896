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
            let expect = (c * 6) as f32; // ranks add 1, 2, 3 per clock
            assert!(read.as_slice().unwrap().iter().all(|v| *v == expect), "rank {rank} clock {c}: {:?}", &read.as_slice().unwrap()[..4]);
            let mut up = ps.pre_update(u).unwrap();
            up.as_mut_slice().unwrap().fill((rank + 1) as f32);
            up.update().unwrap();
            drop(read);
            ps.table_clock(w).unwrap();
        }
        let stats = ps.stats();
        ps.shutdown().unwrap();
        stats
    });
    for s in results {
        assert_eq!(s.slow_path_calls, 0, "{s}");
    }
}

//! Workers in separate network endpoints (one thread per rank, real TCP on
//! loopback) train together exactly as in-process workers do, on every
//! device (`geeps_testkit::device_test!`).

mod common;

use geeps_core::{keys, Slack};
use geeps_testkit::device_test;

// BSP reads may include faster ranks' updates of the current clock, so the
// values depend on timing: checked against exact bounds on each device.
device_test!(bsp_over_tcp_sees_every_update, |backend| {
    let world = 3;
    let results = common::run_ranks(world, move |rank, cluster| {
        let (ps, w, fx) = common::instance(backend, cluster.transport(), 10, 16);
        let k = keys(w, 0..10);
        let (r, u) = common::record_bsp_clock(&ps, w, &k);
        for c in 0..15u32 {
            let read = ps.read(r).unwrap();
            // Ranks add 1, 2, 3 per clock. BSP: every update of clocks < c is
            // in; faster ranks' updates of clock c may be too.
            let floor = (c * 6) as f32;
            let values = fx.get(&read);
            assert!(
                values.iter().all(|v| *v >= floor && *v <= floor + 6.0),
                "rank {rank} clock {c}: {:?}",
                &values[..4]
            );
            let up = ps.pre_update(u).unwrap();
            fx.fill(&up, (rank + 1) as f32);
            up.update().unwrap();
            drop(read);
            ps.table_clock(w).unwrap();
        }
        // After everyone's last clock, a BSP read sees exactly the total.
        let total = fx.get(&ps.read_keys(&k, Slack::BSP).unwrap());
        assert!(total.iter().all(|v| *v == 90.0), "rank {rank}: {:?}", &total[..4]);
        let stats = ps.stats();
        ps.shutdown().unwrap();
        stats
    });
    for s in results {
        assert_eq!(s.slow_path_calls, 1, "only the final keyed read: {s}");
    }
});

/// Host device only (reads are served in place where the host addresses
/// device memory): over TCP and over shared memory, the keepers'
/// publications are read straight into the table-wide buffers whole-table
/// reads are handed, and the keeper of the worker's own process writes its
/// rows there itself, so a worker copies no publication once it runs.
#[test]
fn publications_land_where_whole_table_reads_find_them() {
    const WORLD: usize = 3;
    const ROWS: u32 = 60;
    const WIDTH: usize = 8;
    const CLOCKS: u32 = 20;
    for shared_memory in [false, true] {
        let options = common::options().with_shared_memory(shared_memory);
        let results = common::run_ranks_with(WORLD, options, move |rank, cluster| {
            let (ps, w, _) = common::instance(geeps_testkit::Backend::Host, cluster.transport(), ROWS, WIDTH);
            let k = keys(w, 0..ROWS);
            let (r, u) = common::record_bsp_clock(&ps, w, &k);
            for c in 0..CLOCKS {
                let read = ps.read(r).unwrap();
                let floor = (c * 6) as f32;
                let values = read.as_slice().unwrap();
                assert!(values.iter().all(|v| *v >= floor && *v <= floor + 6.0), "rank {rank} clock {c}");
                let mut up = ps.pre_update(u).unwrap();
                up.as_mut_slice().unwrap().fill((rank + 1) as f32);
                up.update().unwrap();
                drop(read);
                ps.table_clock(w).unwrap();
            }
            let total = ps.read_keys(&k, Slack::BSP).unwrap();
            assert!(total.as_slice().unwrap().iter().all(|v| *v == (CLOCKS * 6) as f32), "rank {rank}");
            drop(total);
            let stats = ps.stats();
            ps.shutdown().unwrap();
            stats
        });
        let partition_bytes = u64::from(ROWS) / WORLD as u64 * WIDTH as u64 * 4;
        for (rank, s) in results.iter().enumerate() {
            let how = if shared_memory { "shared memory" } else { "TCP" };
            // Reads before the landing filled up may be gathered.
            assert!(s.reads_in_place >= u64::from(CLOCKS) / 2, "{how}, rank {rank}: {s}");
            // Landed, a worker copies only the few publications that came
            // before the instance offered its landing or found every
            // landing buffer held (0 to 5 partitions in 72 rank-runs);
            // copying its own keeper's every age is a partition an age,
            // copying every publication three.
            assert!(
                s.bytes_host_to_device <= u64::from(CLOCKS) / 2 * partition_bytes,
                "{how}, rank {rank}: {} bytes copied, {partition_bytes} a partition: {s}",
                s.bytes_host_to_device
            );
        }
    }
}

/// Host device only: the worker is refused at join, before any row reaches a
/// device; what is checked is the transport's token handshake and port release.
#[test]
fn a_worker_with_the_wrong_token_is_refused_with_a_clear_error() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let options = common::options().with_shutdown_timeout(std::time::Duration::from_millis(300));
    let mut keeper =
        geeps_net::NetCluster::start(geeps_net::ClusterSpec::fixed(0, vec![addr.clone()], options.clone())).unwrap();
    // A second process of the "same" rank 0 with another token: the keeper refuses its worker.
    let wrong = options.with_token("other");
    let intruder_transport = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let own = probe.local_addr().unwrap().to_string();
        drop(probe);
        // Its own keeper listens elsewhere; it dials the real keeper as shard 0.
        let mut spec = geeps_net::ClusterSpec::fixed(0, vec![addr.clone()], wrong);
        spec.listen = Some(own);
        geeps_net::NetCluster::start(spec).unwrap()
    };
    let mut b = geeps_core::Geeps::builder(geeps_core::Config::default());
    b.parameter_table("w", 1);
    b.transport(intruder_transport.transport());
    let err = b.build().err().expect("refused");
    assert!(matches!(&err, geeps_core::Error::Mismatch(m) if m.contains("token")), "{err}");
    drop(intruder_transport);
    // Shutdown releases the port: it can be bound again at once.
    let _ = keeper.shutdown();
    std::net::TcpListener::bind(&addr).expect("port released after shutdown");
}

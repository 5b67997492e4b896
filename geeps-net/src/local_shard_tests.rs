//! Tests that a rank's own keeper shard is reached in process: its update
//! batches never cross its socket, the engine still sees every rank's
//! updates, and the leave still reaches the keeper after them.

use std::time::Duration;

use geeps_core::{keys, Config, Geeps, Slack};

use crate::{Addresses, ClusterSpec, NetCluster, NetOptions};

const ROWS: u32 = 64;
const WIDTH: usize = 8;
const CLOCKS: u64 = 3;

fn rendezvous(world: usize) -> String {
    crate::test_rendezvous::loopback_rendezvous(world, "")
}

/// Runs CLOCKS BSP clocks (update every row by rank + 1, clock, read) and
/// returns the last read's values and the socket batches of this keeper.
fn rank(rank: usize, world: usize, server: String) -> (Vec<f32>, u64) {
    // Over TCP: the other ranks' batches must be seen crossing the sockets
    // (shared memory between same-host ranks has its own tests, shm_tests.rs).
    let options = NetOptions::default().with_shutdown_timeout(Duration::from_secs(10)).with_shared_memory(false);
    let addresses = Addresses::Rendezvous { server, hosted_by_rank0: false };
    let mut cluster =
        NetCluster::start(ClusterSpec::new(rank, world, addresses, options).with_listen("127.0.0.1")).unwrap();
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_device_memory(1 << 20));
    let t = b.parameter_table("w", ROWS);
    b.transport(cluster.transport());
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    let k = keys(t, 0..ROWS);
    let mut last = Vec::new();
    for _ in 0..CLOCKS {
        let mut u = ps.pre_update_keys(&k).unwrap();
        u.as_mut_slice().unwrap().fill((rank + 1) as f32);
        u.update().unwrap();
        ps.table_clock(t).unwrap();
        let r = ps.read_keys(&k, Slack::BSP).unwrap();
        last = r.as_slice().unwrap().to_vec();
        r.post().unwrap();
    }
    ps.shutdown().unwrap();
    let batches = cluster.keeper_socket_batches();
    cluster.shutdown().unwrap();
    (last, batches)
}

#[test]
fn own_shard_batches_skip_the_socket_and_every_update_still_counts() {
    let world = 2;
    let server = rendezvous(world);
    let threads: Vec<_> = (0..world)
        .map(|r| {
            let server = server.clone();
            std::thread::spawn(move || rank(r, world, server))
        })
        .collect();
    for (r, t) in threads.into_iter().enumerate() {
        let (values, socket_batches) = t.join().unwrap();
        let want = (CLOCKS as usize * world * (world + 1) / 2) as f32;
        assert!(values.iter().all(|v| *v == want), "rank {r} read {:?}, expected {want}", &values[..4]);
        // One batch per clock from the other rank only; this rank's own came in process.
        assert_eq!(socket_batches, CLOCKS * (world as u64 - 1), "rank {r}'s keeper");
    }
}

//! Tests that a rank's own keeper shard is reached in process: its update
//! batches never cross its socket, the engine still sees every rank's
//! updates, and the leave still reaches the keeper after them.

use crate::test_rendezvous::{bsp_rank, BspRun};
use crate::NetOptions;

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
    let options = NetOptions::default().with_shared_memory(false);
    let run = BspRun { rows: ROWS, width: WIDTH, clocks: CLOCKS };
    bsp_rank(rank, world, server, options, &run, |_, _| (rank + 1) as f32, |c| c.keeper_socket_batches())
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

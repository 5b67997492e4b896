//! Deterministic BSP: keepers apply update batches clock by clock in rank
//! order, so a seeded multi-worker run gives bit-identical tables however
//! its threads happen to be scheduled. Each run here jitters every worker
//! with random sleeps (a different schedule each time) and adds, to two
//! tables read and clocked together, values whose sum depends on the order
//! they are added in; runs must agree to the bit, with the keepers in
//! process and over the network.

mod common;

use std::sync::Arc;
use std::time::Duration;

use geeps::net::{ClusterSpec, NetCluster, NetOptions};
use geeps::{keys, Config, Geeps, InProcessCluster, Slack, Transport};
use rand::Rng;

const WORKERS: usize = 4;
const ROWS: u32 = 12;
const WIDTH: usize = 4;
const CLOCKS: u64 = 12;

/// One worker's BSP training on `transport`, jittered; returns the final table's bits.
fn train(transport: Arc<dyn Transport>) -> Vec<u32> {
    let rank = transport.rank();
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_wait_deadline(Duration::from_secs(60)));
    let w = b.parameter_table("w", ROWS);
    let extra = b.parameter_table("extra", 1);
    b.transport(transport);
    let ps = b.build().unwrap();
    let mut rows = keys(w, 0..ROWS);
    rows.push(geeps::RowKey::new(extra, 0));
    let r = ps.virtual_read(&rows, Slack::BSP).unwrap();
    let u = ps.virtual_pre_update(&rows).unwrap();
    ps.virtual_update(u).unwrap();
    ps.virtual_post_read(r).unwrap();
    ps.virtual_clock().unwrap();
    ps.finish_virtual_iteration().unwrap();
    let mut rng = rand::thread_rng();
    for clock in 0..CLOCKS {
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..3000)));
        let read = ps.read(r).unwrap();
        let seen = read.as_slice().unwrap().to_vec();
        let mut d = ps.pre_update(u).unwrap();
        common::order_sensitive_delta(rank, clock, &seen, d.as_mut_slice().unwrap());
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..3000)));
        d.update().unwrap();
        read.post().unwrap();
        ps.clock().unwrap();
    }
    let last = ps.read_keys(&keys(w, 0..ROWS), Slack::BSP).unwrap();
    let bits = last.as_slice().unwrap().iter().map(|v| v.to_bits()).collect();
    drop(last);
    ps.shutdown().unwrap();
    bits
}

fn in_process_run() -> Vec<Vec<u32>> {
    let cluster = InProcessCluster::new(WORKERS).unwrap();
    let threads: Vec<_> = (0..WORKERS)
        .map(|rank| {
            let t = cluster.transport(rank).unwrap();
            std::thread::spawn(move || train(t))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn network_run() -> Vec<Vec<u32>> {
    let addresses: Vec<String> = (0..WORKERS)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string())
        .collect();
    let threads: Vec<_> = (0..WORKERS)
        .map(|rank| {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                let opts = NetOptions::default().with_shutdown_timeout(Duration::from_secs(20));
                let mut cluster = NetCluster::start(ClusterSpec::fixed(rank, addresses, opts)).unwrap();
                let bits = train(cluster.transport());
                cluster.shutdown().unwrap();
                bits
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn bsp_runs_are_bit_identical_however_threads_are_scheduled() {
    let first = in_process_run();
    // Every worker read the same final table.
    assert!(first.iter().all(|t| *t == first[0]), "workers disagree within one run");
    for run in 0..3 {
        assert_eq!(in_process_run(), first, "in-process run {run} differs from the first");
    }
    // The keepers over TCP (each rank its own shard) sum in the same order.
    let net = network_run();
    assert_eq!(net, first, "the networked run differs from the in-process one");
}

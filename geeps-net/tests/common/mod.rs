//! Shared helpers of the geeps-net tests: start a loopback cluster of N ranks
//! in one process (one thread per rank) through a rendezvous.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use geeps_core::{Config, Geeps, Handle, RowKey, Slack, TableId, Transport};
use geeps_net::{Addresses, ClusterSpec, NetCluster, NetOptions};
use geeps_testkit::{Backend, Fixture};

pub fn options() -> NetOptions {
    NetOptions::default()
        .with_token("test-token")
        .with_peer_timeout(Duration::from_secs(10))
        .with_connect_timeout(Duration::from_secs(10))
        .with_heartbeat(Duration::from_millis(200))
        .with_shutdown_timeout(Duration::from_secs(10))
}

/// Starts a rendezvous on loopback; returns its address.
pub fn rendezvous(world: usize, token: &str) -> String {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap().to_string();
    std_listener.set_nonblocking(true).unwrap();
    let token = token.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            let _ = geeps_net::rendezvous::serve(listener, world, token, Duration::from_secs(20)).await;
        });
    });
    addr
}

pub fn spec(rank: usize, world: usize, server: &str, options: NetOptions) -> ClusterSpec {
    ClusterSpec::new(rank, world, Addresses::Rendezvous { server: server.to_string(), hosted_by_rank0: false }, options)
        .with_listen("127.0.0.1")
}

/// Runs `body(rank, cluster)` on `world` threads, each with its own NetCluster.
pub fn run_ranks<R: Send + 'static>(
    world: usize,
    body: impl Fn(usize, &NetCluster) -> R + Send + Sync + 'static,
) -> Vec<R> {
    run_ranks_with(world, options(), body)
}

/// `run_ranks` with `options` (built on [`options`]) for every rank.
pub fn run_ranks_with<R: Send + 'static>(
    world: usize,
    options: NetOptions,
    body: impl Fn(usize, &NetCluster) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let server = rendezvous(world, "test-token");
    let body = Arc::new(body);
    let threads: Vec<_> = (0..world)
        .map(|rank| {
            let (server, body, options) = (server.clone(), body.clone(), options.clone());
            std::thread::spawn(move || {
                let mut cluster = NetCluster::start(spec(rank, world, &server, options)).expect("cluster start");
                let r = body(rank, &cluster);
                cluster.shutdown().expect("clean shutdown");
                r
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("rank thread")).collect()
}

/// A one-table instance on `transport` and a fresh device of `backend`; the
/// fixture to look into its buffers.
pub fn instance(backend: Backend, transport: Arc<dyn Transport>, rows: u32, width: usize) -> (Geeps, TableId, Fixture) {
    let config = Config::default().with_row_width(width).with_wait_deadline(Duration::from_secs(20));
    let (mut b, fx) = backend.builder(config);
    let t = b.parameter_table("w", rows);
    b.transport(transport);
    (b.build().expect("build"), t, fx)
}

/// Records one clock of `keys` (rows of table `w`) and finishes the virtual
/// iteration: a BSP read, a pre-update and update of the same rows, the
/// read's post and the table's clock. The read's and the pre-update's handles.
pub fn record_bsp_clock(ps: &Geeps, w: TableId, keys: &[RowKey]) -> (Handle, Handle) {
    let r = ps.virtual_read(keys, Slack::BSP).unwrap();
    let u = ps.virtual_pre_update(keys).unwrap();
    ps.virtual_update(u).unwrap();
    ps.virtual_post_read(r).unwrap();
    ps.virtual_table_clock(w).unwrap();
    ps.finish_virtual_iteration().unwrap();
    (r, u)
}

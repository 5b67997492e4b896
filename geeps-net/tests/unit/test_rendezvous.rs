//! What the multi-rank unit tests share: a loopback rendezvous serving
//! `world` ranks with `token` on a thread of its own (it ends when the
//! rendezvous completes or times out), and one rank's BSP loop over a
//! cluster. Test-only.

use std::time::Duration;

use geeps_core::{keys, Config, Geeps, Slack};

use crate::{Addresses, ClusterSpec, NetCluster, NetOptions};

/// The table and clocks of a [`bsp_rank`] run.
pub(crate) struct BspRun {
    pub(crate) rows: u32,
    pub(crate) width: usize,
    pub(crate) clocks: u64,
}

/// One rank joining at `server` with `options`: `clocks` BSP clocks, each
/// updating every value of the table by `delta(clock, index)`, clocking and
/// reading it all back. Returns the last read, and what `inspect` says of
/// the cluster once the instance has shut down (before the cluster does).
pub(crate) fn bsp_rank<T>(
    rank: usize,
    world: usize,
    server: String,
    options: NetOptions,
    run: &BspRun,
    delta: impl Fn(u64, usize) -> f32,
    inspect: impl FnOnce(&NetCluster) -> T,
) -> (Vec<f32>, T) {
    let options = options.with_shutdown_timeout(Duration::from_secs(10));
    let addresses = Addresses::Rendezvous { server, hosted_by_rank0: false };
    let mut cluster =
        NetCluster::start(ClusterSpec::new(rank, world, addresses, options).with_listen("127.0.0.1")).unwrap();
    let mut b = Geeps::builder(Config::default().with_row_width(run.width).with_device_memory(1 << 20));
    let t = b.parameter_table("w", run.rows);
    b.transport(cluster.transport());
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    let k = keys(t, 0..run.rows);
    let mut last = Vec::new();
    for clock in 0..run.clocks {
        let mut u = ps.pre_update_keys(&k).unwrap();
        u.as_mut_slice().unwrap().iter_mut().enumerate().for_each(|(i, d)| *d = delta(clock, i));
        u.update().unwrap();
        ps.table_clock(t).unwrap();
        let r = ps.read_keys(&k, Slack::BSP).unwrap();
        last = r.as_slice().unwrap().to_vec();
        r.post().unwrap();
    }
    ps.shutdown().unwrap();
    let seen = inspect(&cluster);
    cluster.shutdown().unwrap();
    (last, seen)
}

pub(crate) fn loopback_rendezvous(world: usize, token: &str) -> String {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap().to_string();
    std_listener.set_nonblocking(true).unwrap();
    let token = token.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            let _ = crate::bootstrap::rendezvous::serve(listener, world, token, Duration::from_secs(30)).await;
        })
    });
    addr
}

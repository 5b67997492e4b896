//! The congestion control over a real cluster: two ranks over loopback
//! whose options name one (`NetOptions::tcp_congestion`) give it to every
//! keeper connection, the ends their workers open and the ends their
//! keepers accept; a name the kernel lacks fails the start.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use geeps_core::{keys, Config, Geeps, Slack};

use crate::conn::socket_options::congestion_of;
use crate::test_rendezvous::loopback_rendezvous;
use crate::{Addresses, ClusterSpec, NetCluster, NetOptions};

/// A congestion control other than the system's, where the kernel has one
/// (reno is in every kernel).
fn not_the_systems() -> String {
    let system = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let allowed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap_or_default();
    allowed.split_whitespace().find(|n| *n != system.trim()).unwrap_or("reno").to_string()
}

/// The congestion control of every connected TCP socket of this process
/// with an end on one of `ports`.
fn congestion_on(ports: &[u16]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if !std::fs::read_link(entry.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")) {
            continue;
        }
        // SAFETY: the descriptor is open (listed just now) and only borrowed here.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&fd);
        let (Ok(local), Ok(peer)) = (socket.local_addr(), socket.peer_addr()) else { continue };
        let (Some(local), Some(peer)) = (local.as_socket(), peer.as_socket()) else { continue };
        if ports.contains(&local.port()) || ports.contains(&peer.port()) {
            found.push(congestion_of(socket).unwrap());
        }
    }
    found
}

#[test]
fn every_keeper_connection_gets_the_named_congestion_control() {
    let (world, name) = (2, not_the_systems());
    let server = loopback_rendezvous(world, "");
    // Both ranks hold their connections open while rank 0 looks at them.
    let (joined, looked) = (Arc::new(Barrier::new(world)), Arc::new(Barrier::new(world)));
    let threads: Vec<_> = (0..world)
        .map(|rank| {
            let options =
                NetOptions::default().with_tcp_congestion(name.clone()).with_shutdown_timeout(Duration::from_secs(10));
            let (server, joined, looked) = (server.clone(), joined.clone(), looked.clone());
            std::thread::spawn(move || {
                let addresses = Addresses::Rendezvous { server, hosted_by_rank0: false };
                let spec = ClusterSpec::new(rank, world, addresses, options).with_listen("127.0.0.1");
                let mut cluster = NetCluster::start(spec).unwrap();
                let mut b = Geeps::builder(Config::default().with_row_width(4).with_device_memory(1 << 20));
                let t = b.parameter_table("w", 10);
                b.transport(cluster.transport());
                let ps = b.build().unwrap();
                ps.finish_virtual_iteration().unwrap();
                let k = keys(t, 0..10);
                ps.pre_update_keys(&k).unwrap().update().unwrap();
                ps.table_clock(t).unwrap();
                ps.read_keys(&k, Slack::BSP).unwrap().post().unwrap();
                joined.wait();
                let seen = (rank == 0).then(|| {
                    let ports: Vec<u16> =
                        cluster.addresses().iter().map(|a| a.rsplit(':').next().unwrap().parse().unwrap()).collect();
                    congestion_on(&ports)
                });
                looked.wait();
                ps.shutdown().unwrap();
                cluster.shutdown().unwrap();
                seen
            })
        })
        .collect();
    let seen = threads.into_iter().filter_map(|t| t.join().unwrap()).next().unwrap();
    // Each worker joins both keepers: 4 connections, both ends in this process.
    assert_eq!(seen.len(), 8, "keeper connections found: {seen:?}");
    assert!(seen.iter().all(|n| *n == name), "every end should use {name}: {seen:?}");
}

#[test]
fn a_congestion_control_the_kernel_lacks_fails_the_start_naming_it() {
    let options = NetOptions::default().with_tcp_congestion("warp9");
    let spec =
        ClusterSpec::new(0, 1, Addresses::Rendezvous { server: "127.0.0.1:9".into(), hosted_by_rank0: false }, options);
    let e = NetCluster::start(spec).err().expect("the start should fail").to_string();
    assert!(e.contains("tcp_congestion") && e.contains("no congestion control `warp9`"), "{e}");
}

//! The admin endpoint, through its generated gRPC client: status names
//! every rank with its clock, its last report and the bytes keeper 0 moved
//! for it, and the slowest rank; drain reaches every worker; beyond
//! loopback the endpoint needs the token, and refuses to start without one.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use geeps_core::{keys, Config, Geeps};

use crate::admin::proto::admin_client::AdminClient;
use crate::admin::proto::{CheckpointRequest, DrainRequest, StatusReply, StatusRequest};
use crate::{ClusterSpec, NetCluster, NetOptions};
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

fn free_port() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

fn options() -> NetOptions {
    NetOptions::default()
        .with_heartbeat(Duration::from_millis(100))
        .with_peer_timeout(Duration::from_secs(20))
        .with_shutdown_timeout(Duration::from_secs(10))
}

/// Joins, then updates and clocks `clocks` times without reading (so no rank waits).
fn worker(cluster: &NetCluster, clocks: usize) -> Geeps {
    let mut b = Geeps::builder(Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(30)));
    let w = b.parameter_table("w", 6);
    b.transport(cluster.transport());
    let ps = b.build().unwrap();
    ps.finish_virtual_iteration().unwrap();
    for _ in 0..clocks {
        let mut delta = ps.pre_update_keys(&keys(w, 0..6)).unwrap();
        delta.as_mut_slice().unwrap().fill(1.0);
        delta.update().unwrap();
        ps.clock().unwrap();
    }
    ps
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what} within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn status_reports_every_rank_and_checkpoint_and_drain_requests_reach_every_worker() {
    let addresses = vec![free_port(), free_port()];
    let (ready_tx, ready_rx) = mpsc::channel();
    let rank1 = {
        let addresses = addresses.clone();
        std::thread::spawn(move || {
            let mut cluster = NetCluster::start(ClusterSpec::fixed(1, addresses, options().with_admin("0"))).unwrap();
            assert_eq!(cluster.admin_address(), None, "only rank 0 serves the endpoint");
            let ps = worker(&cluster, 2);
            ready_tx.send(()).unwrap();
            wait_until("rank 1 hears both checkpoint requests", || ps.checkpoint_requests() == 2);
            wait_until("rank 1 hears the drain", || ps.drain_requested());
            ps.shutdown().unwrap();
            cluster.shutdown().unwrap();
        })
    };
    let mut cluster = NetCluster::start(ClusterSpec::fixed(0, addresses, options().with_admin("127.0.0.1:0"))).unwrap();
    let addr = cluster.admin_address().expect("rank 0 serves the endpoint");
    assert!(addr.ip().is_loopback());
    let ps = worker(&cluster, 4);
    ready_rx.recv_timeout(Duration::from_secs(30)).unwrap();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut client = rt.block_on(AdminClient::connect(format!("http://{addr}"))).unwrap();
    let mut status = StatusReply::default();
    wait_until("both ranks reported and counted", || {
        status = rt.block_on(client.status(StatusRequest {})).unwrap().into_inner();
        status.ranks.iter().all(|r| r.reported) && status.ranks.iter().map(|r| r.clock).collect::<Vec<_>>() == [4, 2]
    });
    assert_eq!((status.world, status.tables.clone()), (2, vec!["w".to_string()]));
    for r in &status.ranks {
        assert_eq!(r.state, "running", "rank {}", r.rank);
        assert!((0.0..=1.0).contains(&r.stall_fraction), "rank {}: stall {}", r.rank, r.stall_fraction);
        assert!(r.wall_seconds > 0.0 && r.seconds_since_report < 5.0, "rank {}: {r:?}", r.rank);
        // Rows 0..3 of w are keeper 0's: 3 rows x 4 floats x 4 bytes per clock.
        assert_eq!(r.bytes_received, 48 * r.clock, "rank {}", r.rank);
        assert!(!r.address.is_empty());
    }
    assert_eq!((status.slowest_rank, status.slowest_clock, status.draining), (1, 2, false));

    // Reflection lists the service, as grpcurl sees it.
    let channel = rt.block_on(tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect());
    let mut reflect = ServerReflectionClient::new(channel.unwrap());
    let ask = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = rt.block_on(reflect.server_reflection_info(tokio_stream::iter(vec![ask]))).unwrap().into_inner();
    match rt.block_on(answers.message()).unwrap().and_then(|a| a.message_response) {
        Some(MessageResponse::ListServicesResponse(list)) => {
            assert!(list.service.iter().any(|s| s.name == "geeps.admin.v1.Admin"), "{list:?}")
        }
        other => panic!("reflection answered {other:?}"),
    }

    assert_eq!(ps.checkpoint_requests(), 0);
    for sequence in [1, 2] {
        let asked = rt.block_on(client.checkpoint(CheckpointRequest {})).unwrap().into_inner();
        assert_eq!((asked.ranks_told, asked.sequence), (2, sequence));
    }
    wait_until("rank 0 hears both checkpoint requests", || ps.checkpoint_requests() == 2);

    let told = rt.block_on(client.drain(DrainRequest {})).unwrap().into_inner();
    assert_eq!(told.ranks_told, 2);
    wait_until("rank 0 hears the drain", || ps.drain_requested());
    assert!(rt.block_on(client.status(StatusRequest {})).unwrap().into_inner().draining);
    // Each rank's keeper waits for the other's worker to leave.
    ps.shutdown().unwrap();
    rank1.join().unwrap();
    cluster.shutdown().unwrap();
}

#[test]
fn beyond_loopback_the_endpoint_needs_the_token() {
    let refused = NetCluster::start(ClusterSpec::fixed(0, vec![free_port()], options().with_admin("0.0.0.0:0")));
    let e = refused.err().expect("no token, not loopback").to_string();
    assert!(e.contains("GEEPS_TOKEN"), "{e}");

    let opts = options().with_token("s3cret").with_admin("0.0.0.0:0").with_shutdown_timeout(Duration::from_secs(1));
    let mut cluster = NetCluster::start(ClusterSpec::fixed(0, vec![free_port()], opts)).unwrap();
    let port = cluster.admin_address().unwrap().port();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut client = rt.block_on(AdminClient::connect(format!("http://127.0.0.1:{port}"))).unwrap();
    let denied = rt.block_on(client.status(StatusRequest {})).unwrap_err();
    assert_eq!(denied.code(), tonic::Code::Unauthenticated);
    let mut wrong = tonic::Request::new(StatusRequest {});
    wrong.metadata_mut().insert("authorization", "Bearer guess".parse().unwrap());
    assert_eq!(rt.block_on(client.status(wrong)).unwrap_err().code(), tonic::Code::Unauthenticated);
    let mut right = tonic::Request::new(StatusRequest {});
    right.metadata_mut().insert("authorization", "Bearer s3cret".parse().unwrap());
    let status = rt.block_on(client.status(right)).unwrap().into_inner();
    assert_eq!(status.world, 1);
    assert_eq!(status.ranks[0].state, "not joined");
    drop(client);
    let _ = cluster.shutdown();
}

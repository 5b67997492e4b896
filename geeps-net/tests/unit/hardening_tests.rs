//! The hardened wire and failure reporting, seen from a peer: frame lengths
//! are checked before anything is allocated, a peer that has not said hello
//! gets a small frame, a short deadline and a bounded number of pending
//! connections, the token is required beyond loopback, a silent peer is
//! named with its host and how long it was silent, a rank refused at join
//! is reported to the other ranks with the reason, and rank 0 serving the
//! rendezvous keeps it up after a refusal until a late rank has heard.
//!
//! (A unit test module: it speaks the wire protocol, which is internal.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use geeps_core::{keys, Config, Error, Geeps, Slack};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::frame::{read_frame, read_frame_within, write_frame, FrameError};
use crate::wire::{Body, DeclaredKind, FailureKind, Header, Hello, Ping, TableDecl, UpdateHeader, PROTOCOL_VERSION};
use crate::{Addresses, ClusterSpec, NetCluster, NetOptions};

/// Records the largest allocation made on a thread while it is tracking.
struct Tracking;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    if TRACKING.try_with(Cell::get).unwrap_or(false) {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    }
}

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Runs `f` on this thread and returns its result with the largest single
/// allocation it made.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    TRACKING.with(|t| t.set(true));
    let r = f();
    TRACKING.with(|t| t.set(false));
    (r, LARGEST.with(Cell::get))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn free_port() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

fn hello(rank: u32, world: u32, token: &str) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        token: token.into(),
        rank,
        world,
        row_width: 4,
        tables: vec![TableDecl { name: "w".into(), kind: DeclaredKind::Parameter.into(), rows: 4 }],
        host: String::new(),
        stripes: 1,
    }
}

fn options() -> NetOptions {
    NetOptions::default()
        .with_token("test-token")
        .with_peer_timeout(Duration::from_secs(10))
        .with_connect_timeout(Duration::from_secs(30))
        .with_heartbeat(Duration::from_millis(200))
        .with_shutdown_timeout(Duration::from_millis(300))
}

/// A keeper of rank 0 in a world of `world` (the other keepers never start).
fn keeper(world: usize, options: NetOptions) -> (NetCluster, String) {
    let addr = free_port();
    let mut addresses = vec![addr.clone()];
    addresses.extend((1..world).map(|_| "127.0.0.1:9".to_string()));
    (NetCluster::start(ClusterSpec::fixed(0, addresses, options)).unwrap(), addr)
}

/// Whether the peer closes `s` within `within` without sending a frame.
async fn closed_without_reply(s: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(tokio::time::timeout(within, s.read(&mut byte)).await, Ok(Ok(0)) | Ok(Err(_)))
}

#[test]
fn declared_lengths_are_checked_before_any_allocation() {
    let rt = runtime();
    // A 4 GiB header declared, and a peer that would then send nothing more
    // (the stream stays open): refused at once, nothing allocated for it.
    let (result, largest) = largest_allocation(|| {
        rt.block_on(async {
            let (mut client, mut server) = tokio::io::duplex(64);
            client.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
            let r = tokio::time::timeout(Duration::from_secs(5), read_frame_within(&mut server, 64 << 10, 0)).await;
            drop(client);
            r
        })
    });
    let result = result.expect("the length check does not wait for the bytes it declares");
    assert!(matches!(result, Err(FrameError::HeaderTooLarge { len, limit: 65536 }) if len == u32::MAX as usize));
    assert!(largest < 64 << 10, "allocated {largest} bytes for a refused header");

    // A small header declaring a 3 GiB payload: refused before the payload.
    let mut header = Header::new(Body::Update(UpdateHeader {
        table: 0,
        partition: 0,
        worker: 0,
        clock: 0,
        has_deltas: true,
        ..Default::default()
    }));
    header.payload_len = 3 << 30;
    let mut bytes = (header.encoded_len() as u32).to_le_bytes().to_vec();
    header.encode(&mut bytes).unwrap();
    let (result, largest) = largest_allocation(|| {
        rt.block_on(async {
            let (mut client, mut server) = tokio::io::duplex(64);
            client.write_all(&bytes).await.unwrap();
            let r = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut server, 1 << 30)).await;
            drop(client);
            r
        })
    });
    let result = result.expect("the length check does not wait for the payload");
    assert!(matches!(result, Err(FrameError::PayloadTooLarge { len, limit }) if len == 3 << 30 && limit == 1 << 30));
    assert!(largest < 64 << 10, "allocated {largest} bytes for a refused payload");
}

#[test]
fn before_its_hello_a_peer_gets_a_small_frame_and_a_short_deadline() {
    let (mut cluster, addr) =
        keeper(2, options().with_handshake_timeout(Duration::from_millis(300)).with_max_handshake_bytes(64 << 10));
    runtime().block_on(async {
        // A well-formed hello of 100 KiB (a long token): over the handshake
        // limit, so the keeper closes without reading it or answering.
        let big = Hello { token: "x".repeat(100 << 10), ..hello(1, 2, "test-token") };
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let _ = write_frame(&mut s, Header::new(Body::Hello(big)), None).await;
        assert!(closed_without_reply(&mut s, Duration::from_secs(5)).await, "an oversized hello was answered");

        // A hello carrying a payload: closed too.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        let _ =
            write_frame(&mut s, Header::new(Body::Hello(hello(1, 2, "test-token"))), Some(&vec![0u8; 8].into())).await;
        assert!(closed_without_reply(&mut s, Duration::from_secs(5)).await, "a hello with a payload was answered");

        // A peer that starts a frame and stalls: dropped after the handshake
        // deadline (300 ms here), long before the connect timeout (30 s).
        let start = Instant::now();
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&[40, 0]).await.unwrap();
        assert!(closed_without_reply(&mut s, Duration::from_secs(10)).await, "a stalled peer was kept");
        assert!(start.elapsed() < Duration::from_secs(10), "dropped after {:?}", start.elapsed());

        // The keeper still serves a worker that says hello in time.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        write_frame(&mut s, Header::new(Body::Hello(hello(1, 2, "test-token"))), None).await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut s, 1 << 20)).await.unwrap().unwrap();
        assert!(matches!(reply.0.body, Some(Body::Welcome(_))), "{:?}", reply.0.body);
    });
    let _ = cluster.shutdown();
}

#[test]
fn pending_connections_per_keeper_are_bounded() {
    let (cluster, addr) =
        keeper(1, options().with_max_pending_connections(4).with_handshake_timeout(Duration::from_secs(30)));
    let rt = runtime();
    // Four connections that never say hello fill the keeper's pending slots.
    let mut idle = rt.block_on(async {
        let mut idle = Vec::new();
        for _ in 0..4 {
            idle.push(TcpStream::connect(&addr).await.unwrap());
        }
        // The fifth is closed at once, well before any handshake deadline.
        let mut fifth = TcpStream::connect(&addr).await.unwrap();
        assert!(closed_without_reply(&mut fifth, Duration::from_secs(10)).await, "a fifth pending connection was kept");
        // The first four are still open (they have 30 s to say hello).
        let mut byte = [0u8; 1];
        assert!(tokio::time::timeout(Duration::from_millis(300), idle[0].read(&mut byte)).await.is_err());
        idle
    });
    // A real worker meanwhile is closed too, and tries again until a slot frees.
    let mut b = Geeps::builder(Config::default().with_row_width(4));
    b.parameter_table("w", 4);
    b.transport(cluster.transport());
    let worker = std::thread::spawn(move || {
        let start = Instant::now();
        let ps = b.build();
        (ps.map(|ps| ps.shutdown()), start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(700));
    idle.clear();
    let (built, after) = worker.join().unwrap();
    assert!(matches!(built, Ok(Ok(()))), "{built:?}");
    assert!(after >= Duration::from_millis(500), "the worker got in while every slot was taken ({after:?})");
    drop(cluster);
}

#[test]
fn an_empty_token_is_refused_beyond_loopback() {
    let on = |listen: &str, token: &str| {
        let spec = ClusterSpec::fixed(0, vec![free_port()], options().with_token(token)).with_listen(listen);
        NetCluster::start(spec)
    };
    match on("0.0.0.0", "") {
        Err(Error::InvalidConfig { field: "token", reason }) => {
            assert!(reason.contains("GEEPS_TOKEN") && reason.contains("0.0.0.0"), "{reason}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a keeper listened on every interface without a token"),
    }
    // With a token, or on loopback, it starts.
    for (listen, token) in [("0.0.0.0", "s3cret"), ("127.0.0.1", "")] {
        let mut c = on(listen, token).unwrap_or_else(|e| panic!("{listen} with token {token:?}: {e}"));
        let _ = c.shutdown();
    }
    // The rendezvous rank 0 hosts is held to the same rule.
    let server = free_port();
    let spec =
        ClusterSpec::new(0, 2, Addresses::Rendezvous { server, hosted_by_rank0: true }, options().with_token(""))
            .with_listen("0.0.0.0");
    assert!(matches!(NetCluster::start(spec), Err(Error::InvalidConfig { field: "token", .. })));
    // Options that cannot work together are refused before anything listens.
    let spec = ClusterSpec::fixed(0, vec![free_port()], options().with_heartbeat(Duration::from_secs(6)));
    assert!(matches!(NetCluster::start(spec), Err(Error::InvalidConfig { field: "peer_timeout", .. })));
}

#[test]
fn a_silent_worker_is_named_with_its_host_and_how_long_it_was_silent() {
    // The silence limit and heartbeat are options: 800 ms here, 30 s by default.
    let (mut cluster, addr) =
        keeper(2, options().with_peer_timeout(Duration::from_millis(800)).with_heartbeat(Duration::from_millis(100)));
    runtime().block_on(async {
        let join = |rank| {
            let addr = addr.clone();
            async move {
                let mut s = TcpStream::connect(&addr).await.unwrap();
                write_frame(&mut s, Header::new(Body::Hello(hello(rank, 2, "test-token"))), None).await.unwrap();
                let (h, _) = read_frame(&mut s, 1 << 20).await.unwrap();
                assert!(matches!(h.body, Some(Body::Welcome(_))), "{:?}", h.body);
                s
            }
        };
        let watcher = join(0).await;
        let silent = join(1).await;
        let (mut rd, mut wr) = watcher.into_split();
        // The watcher keeps itself alive; rank 1 says nothing more.
        let pinger = tokio::spawn(async move {
            loop {
                if write_frame(&mut wr, Header::new(Body::Ping(Ping {})), None).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let start = Instant::now();
        let failure = loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut rd, 1 << 20)).await;
            match frame.expect("no lost-peer report within 10 s").unwrap() {
                (Header { body: Some(Body::Failure(f)), .. }, _) => break f,
                _ => continue,
            }
        };
        assert_eq!((failure.kind, failure.rank), (FailureKind::PeerLost.into(), 1), "{failure:?}");
        assert!(failure.address.starts_with("127.0.0.1:"), "names the host: {failure:?}");
        assert!(
            failure.message.contains("silent for 0.") || failure.message.contains("silent for 1."),
            "says how long: {failure:?}"
        );
        assert!(failure.message.contains("peer_timeout = 0.8 s"), "{failure:?}");
        assert!(start.elapsed() < Duration::from_secs(10));
        pinger.abort();
        drop(silent);
    });
    let _ = cluster.shutdown();
}

/// A rendezvous for `world` ranks on a thread of its own, with `options`;
/// the handle gives what it served.
fn rendezvous_with(world: usize, options: NetOptions) -> (String, std::thread::JoinHandle<Result<Vec<String>, Error>>) {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap().to_string();
    std_listener.set_nonblocking(true).unwrap();
    let served = std::thread::spawn(move || {
        runtime().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            crate::bootstrap::rendezvous::serve_with(listener, world, options).await
        })
    });
    (addr, served)
}

/// Ranks 0..world joining at `server` with `options`, each on a thread:
/// whether each started (its error otherwise), and when it knew.
fn start_ranks(
    world: usize,
    server: &str,
    token_of: impl Fn(usize) -> &'static str,
) -> Vec<(Result<(), Error>, Duration)> {
    let start = Instant::now();
    let ranks: Vec<_> = (0..world)
        .map(|rank| {
            let server = server.to_string();
            let token = token_of(rank);
            std::thread::spawn(move || {
                let spec = ClusterSpec::new(
                    rank,
                    world,
                    Addresses::Rendezvous { server, hosted_by_rank0: false },
                    options().with_token(token).with_connect_timeout(Duration::from_secs(20)),
                )
                .with_listen("127.0.0.1");
                let started = NetCluster::start(spec).map(|mut c| {
                    let _ = c.shutdown();
                });
                (started, start.elapsed())
            })
        })
        .collect();
    ranks.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn a_rank_with_the_wrong_token_is_refused_and_named_when_the_rendezvous_times_out() {
    let world = 3;
    let (server, served) = rendezvous_with(world, options().with_connect_timeout(Duration::from_secs(3)));
    let started = start_ranks(world, &server, |rank| if rank == 2 { "wrong" } else { "test-token" });
    let (err, after) = match &started[2] {
        (Err(e), after) => (e.to_string(), *after),
        (Ok(()), _) => panic!("rank 2 started with a wrong token"),
    };
    // The rank without the token is told at once.
    assert!(err.contains("token mismatch"), "{err}");
    assert!(after < Duration::from_secs(2), "rank 2 learnt it after {after:?}");
    // The ranks with it are not stopped by a registration without it; the
    // rendezvous ends at its timeout, naming what it turned away.
    let served = served.join().unwrap().expect_err("the rendezvous completed without rank 2");
    let text = served.to_string();
    assert!(text.contains("ranks [2] to register"), "{text}");
    assert!(text.contains("registrations as ranks {2} without the cluster token"), "{text}");
    for (rank, (result, _)) in started.iter().enumerate().take(2) {
        assert!(result.is_err(), "rank {rank} started without rank 2");
    }
}

#[test]
fn strangers_at_the_rendezvous_never_stop_the_real_ranks() {
    let world = 3;
    let (server, served) = rendezvous_with(
        world,
        options()
            .with_connect_timeout(Duration::from_secs(20))
            .with_handshake_timeout(Duration::from_millis(500))
            .with_max_pending_connections(8),
    );
    // Before any rank: idle connections, far more than the rendezvous
    // reads at once, garbage, and a registration without the token.
    let mut idle: Vec<_> = (0..40).filter_map(|_| std::net::TcpStream::connect(&server).ok()).collect();
    let mut garbage = std::net::TcpStream::connect(&server).unwrap();
    use std::io::Write;
    let _ = garbage.write_all(b"GET / HTTP/1.0\r\n\r\n");
    let intruder = runtime().block_on(crate::bootstrap::rendezvous::register(
        &server,
        0,
        world,
        "not-the-token",
        "127.0.0.1:9",
        Duration::from_secs(5),
    ));
    assert!(intruder.is_err_and(|e| e.to_string().contains("token mismatch")));
    let started = start_ranks(world, &server, |_| "test-token");
    for (rank, (result, after)) in started.iter().enumerate() {
        assert!(result.is_ok(), "rank {rank}: {result:?}");
        assert!(*after < Duration::from_secs(15), "rank {rank} started after {after:?}");
    }
    assert!(served.join().unwrap().is_ok());
    idle.clear();
}

#[test]
fn rank_0_serves_the_rendezvous_after_a_refusal_until_a_late_rank_is_told() {
    // torchrun's start: rank 0 hosts the rendezvous in its process. Rank 2
    // is refused (another world size) at once; rank 1 comes 1.5 s after
    // rank 0 has its answer and must still hear why, not find the port
    // closed and retry until its connect timeout.
    let server = free_port();
    let start = Instant::now();
    let rank = |rank: usize, world: usize, delay: Duration| {
        let server = server.clone();
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let addresses = Addresses::Rendezvous { server, hosted_by_rank0: true };
            let options = options().with_connect_timeout(Duration::from_secs(20));
            let spec = ClusterSpec::new(rank, world, addresses, options).with_listen("127.0.0.1");
            let started = NetCluster::start(spec).map(|mut c| {
                let _ = c.shutdown();
            });
            (started, start.elapsed())
        })
    };
    let r0 = rank(0, 3, Duration::ZERO);
    let r2 = rank(2, 4, Duration::from_millis(200));
    let (refused, _) = r2.join().unwrap();
    let late = rank(1, 3, Duration::from_millis(1500));
    let (r0, r0_after) = r0.join().unwrap();
    let (r1, r1_after) = late.join().unwrap();
    let text = refused.expect_err("rank 2 of world 4 started").to_string();
    assert!(text.contains("rank 2 of world 4 does not fit"), "{text}");
    for (who, result, after) in [("rank 0", r0, r0_after), ("rank 1", r1, r1_after)] {
        let text = result.expect_err("started without rank 2").to_string();
        assert!(text.contains("rank 2") && text.contains("was refused at the rendezvous"), "{who}: {text}");
        assert!(after < Duration::from_secs(10), "{who} learnt it after {after:?}");
    }
}

#[test]
fn a_rank_refused_at_join_is_reported_to_the_ranks_that_joined() {
    let world = 3;
    let addresses: Vec<String> = (0..world).map(|_| free_port()).collect();
    let (built_tx, built_rx) = mpsc::channel();
    let mut built_rx = Some(built_rx);
    let ranks: Vec<_> = (0..world)
        .map(|rank| {
            let (addresses, built_tx) = (addresses.clone(), built_tx.clone());
            let built_rx = if rank == 2 { built_rx.take() } else { None };
            std::thread::spawn(move || -> (usize, Error, Duration) {
                let mut cluster = NetCluster::start(ClusterSpec::fixed(rank, addresses, options())).unwrap();
                // Rank 2 declares another table size than ranks 0 and 1.
                let rows = if rank == 2 { 5 } else { 4 };
                let config = Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(30));
                let mut b = Geeps::builder(config);
                let w = b.parameter_table("w", rows);
                b.transport(cluster.transport());
                if let Some(rx) = built_rx {
                    // Joins once the others have: every keeper knows their tables.
                    for _ in 0..2 {
                        rx.recv_timeout(Duration::from_secs(30)).unwrap();
                    }
                }
                let ps = match b.build() {
                    Ok(ps) => ps,
                    Err(e) => {
                        let _ = cluster.shutdown();
                        return (rank, e, Duration::ZERO);
                    }
                };
                let _ = built_tx.send(rank);
                // The refusal may reach this rank at any of these calls; the
                // read waits for rank 2's clock 0, which never comes.
                let start = Instant::now();
                let err = ps
                    .finish_virtual_iteration()
                    .and_then(|()| ps.clock())
                    .and_then(|()| ps.read_keys(&keys(w, 0..4), Slack::BSP).map(drop))
                    .expect_err("rank 2 never clocks");
                let waited = start.elapsed();
                let _ = ps.shutdown();
                let _ = cluster.shutdown();
                (rank, err, waited)
            })
        })
        .collect();
    for t in ranks {
        let (rank, err, waited) = t.join().unwrap();
        let text = err.to_string();
        assert!(matches!(err, Error::Mismatch(_)), "rank {rank}: {text}");
        assert!(text.contains("tables"), "rank {rank} is told why: {text}");
        if rank != 2 {
            assert!(text.contains("rank 2"), "rank {rank} is told which rank: {text}");
            // Not the 30 s wait deadline.
            assert!(waited < Duration::from_secs(20), "rank {rank} learnt it after {waited:?}");
        }
    }
}

#[test]
fn a_rank_that_stops_before_its_worker_joins_is_reported_at_once() {
    // Rank 1 starts its keeper, then fails before building an instance (a
    // GPU that does not open, say) and shuts its cluster membership down.
    let addresses = vec![free_port(), free_port()];
    let rank1 = {
        let addresses = addresses.clone();
        std::thread::spawn(move || {
            let mut cluster = NetCluster::start(ClusterSpec::fixed(1, addresses, options())).unwrap();
            std::thread::sleep(Duration::from_millis(500));
            let start = Instant::now();
            cluster.shutdown().unwrap();
            start.elapsed()
        })
    };
    let mut cluster = NetCluster::start(ClusterSpec::fixed(0, addresses, options())).unwrap();
    let mut b = Geeps::builder(Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(60)));
    let w = b.parameter_table("w", 4);
    b.transport(cluster.transport());
    let start = Instant::now();
    let err = b
        .build()
        .and_then(|ps| {
            ps.finish_virtual_iteration()?;
            ps.clock()?;
            ps.read_keys(&keys(w, 0..4), Slack::BSP).map(drop)
        })
        .expect_err("rank 1 never clocks");
    let waited = start.elapsed();
    let text = err.to_string();
    assert!(matches!(err, Error::PeerLost { rank: 1, .. }), "{text}");
    assert!(text.contains("before its worker joined"), "{text}");
    // Not the 60 s wait deadline, nor rank 1's shutdown timeout.
    assert!(waited < Duration::from_secs(20), "learnt after {waited:?}");
    assert!(rank1.join().unwrap() < Duration::from_secs(10), "rank 1's shutdown did not wait for the others");
    let _ = cluster.shutdown();
}

#[test]
fn a_rank_that_fails_after_joining_is_reported_at_once_with_its_cause() {
    // Every rank trains; rank 2 fails on its own at clock 2 (its snapshot
    // cannot be written, say), drops its instance and calls `fail`.
    let world = 3;
    let addresses: Vec<String> = (0..world).map(|_| free_port()).collect();
    let ranks: Vec<_> = (0..world)
        .map(|rank| {
            let addresses = addresses.clone();
            std::thread::spawn(move || -> (Result<(), Error>, Duration) {
                let mut cluster = NetCluster::start(ClusterSpec::fixed(rank, addresses, options())).unwrap();
                let config = Config::default().with_row_width(4).with_wait_deadline(Duration::from_secs(60));
                let mut b = Geeps::builder(config);
                let w = b.parameter_table("w", 4);
                b.transport(cluster.transport());
                let ps = b.build().unwrap();
                ps.finish_virtual_iteration().unwrap();
                let mut failed_at = Instant::now();
                let result = (0..50).try_for_each(|clock| {
                    if rank == 2 && clock == 2 {
                        return Err(Error::Io("snapshot: cannot write 4096 bytes: No space left on device".into()));
                    }
                    let mut u = ps.pre_update_keys(&keys(w, 0..4))?;
                    u.as_mut_slice()?.fill(1.0);
                    u.update()?;
                    ps.table_clock(w)?;
                    failed_at = Instant::now();
                    ps.read_keys(&keys(w, 0..4), Slack::BSP)?.post()
                });
                // The cluster hears of a failure before the instance leaves it.
                let start = Instant::now();
                match &result {
                    Ok(()) => {
                        drop(ps);
                        cluster.shutdown().unwrap()
                    }
                    Err(e) => {
                        cluster.fail(&e.to_string());
                        drop(ps);
                    }
                }
                (result, if rank == 2 { start.elapsed() } else { failed_at.elapsed() })
            })
        })
        .collect();
    for (rank, t) in ranks.into_iter().enumerate() {
        let (result, took) = t.join().unwrap();
        let text = result.expect_err("the cluster cannot finish without rank 2").to_string();
        assert!(text.contains("No space left on device"), "rank {rank}: {text}");
        if rank != 2 {
            assert!(text.contains("rank 2 failed"), "rank {rank}: {text}");
        }
        // Neither the 60 s wait deadline, the 10 s peer timeout, nor a shutdown waiting for the others.
        assert!(took < Duration::from_secs(5), "rank {rank} took {took:?}");
    }
}

/// Out-of-descriptor tests run their listener in a child: this test binary
/// again, running only `test` with this variable set, so that its lowered
/// open-file limit touches nothing else in the suite.
#[cfg(target_os = "linux")]
const FD_CHILD: &str = "GEEPS_TEST_FD_CHILD";

/// Lowers this process's open-file limit to what is open now plus `spare`.
#[cfg(target_os = "linux")]
fn leave_descriptors(spare: u64) {
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = (open + spare) as libc::rlim_t;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

/// A child process, killed when the test ends, passed or failed.
#[cfg(target_os = "linux")]
struct Child(std::process::Child);

#[cfg(target_os = "linux")]
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the child half of `test`; returns it, its further output and the
/// address it printed.
#[cfg(target_os = "linux")]
fn fd_child(test: &str) -> (Child, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>, String) {
    use std::io::BufRead;
    let name = format!("{}::{test}", module_path!().split_once("::").unwrap().1);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(FD_CHILD, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("the child ended before saying where it listens").unwrap();
        // libtest may print the test's name on the same line first.
        if let Some((_, addr)) = line.split_once("LISTENING ") {
            break addr.trim().to_string();
        }
    };
    (Child(child), lines, addr)
}

/// CPU time (user and system) `pid` has used.
#[cfg(target_os = "linux")]
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// Opens `n` connections to `addr` that never send a byte (the kernel
/// completes them from the listen queue whether accepted or not).
#[cfg(target_os = "linux")]
async fn idle_connections(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut idle = Vec::new();
    for _ in 0..n {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    idle
}

#[cfg(target_os = "linux")]
#[test]
fn a_keeper_out_of_descriptors_backs_off_and_serves_again() {
    const TEST: &str = "a_keeper_out_of_descriptors_backs_off_and_serves_again";
    let handshake = Duration::from_millis(1500);
    if std::env::var_os(FD_CHILD).is_some() {
        let (_cluster, addr) = keeper(2, options().with_handshake_timeout(handshake));
        leave_descriptors(20);
        println!("LISTENING {addr}");
        // Serves until the parent closes stdin or kills it.
        let _ = std::io::stdin().read_line(&mut String::new());
        std::process::exit(0);
    }
    let (child, _lines, addr) = fd_child(TEST);
    runtime().block_on(async {
        // Sixty strangers for twenty descriptors: the keeper's accepts fail
        // with EMFILE until handshake deadlines free some.
        let mut idle = idle_connections(&addr, 60).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (cpu, wall) = (cpu_time(child.0.id()), Instant::now());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (cpu, wall) = (cpu_time(child.0.id()) - cpu, wall.elapsed());
        // A loop that retries at once burns a core here; backing off, the
        // keeper sleeps.
        assert!(cpu < wall * 3 / 10, "the keeper used {cpu:?} of CPU in {wall:?} while out of descriptors");
        // A stranger it accepted is closed at the handshake deadline.
        assert!(
            closed_without_reply(&mut idle[0], Duration::from_secs(20)).await,
            "an idle connection outlived the handshake deadline"
        );
        // Once the strangers are gone, a worker that says hello is served.
        idle.clear();
        let start = Instant::now();
        let mut s = TcpStream::connect(&addr).await.unwrap();
        write_frame(&mut s, Header::new(Body::Hello(hello(1, 2, "test-token"))), None).await.unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(30), read_frame(&mut s, 1 << 20)).await;
        let reply = reply.unwrap_or_else(|_| panic!("no welcome within {:?}", start.elapsed())).unwrap();
        assert!(matches!(reply.0.body, Some(Body::Welcome(_))), "{:?}", reply.0.body);
    });
    drop(child);
}

#[cfg(target_os = "linux")]
#[test]
fn the_rendezvous_rides_out_running_out_of_descriptors() {
    const TEST: &str = "the_rendezvous_rides_out_running_out_of_descriptors";
    if std::env::var_os(FD_CHILD).is_some() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        leave_descriptors(20);
        println!("LISTENING {addr}");
        let options =
            options().with_handshake_timeout(Duration::from_millis(1500)).with_connect_timeout(Duration::from_secs(60));
        let served = rt.block_on(crate::bootstrap::rendezvous::serve_with(listener, 2, options));
        println!("SERVED {served:?}");
        std::process::exit(0);
    }
    let (child, mut lines, addr) = fd_child(TEST);
    let rt = runtime();
    let idle = rt.block_on(async {
        let idle = idle_connections(&addr, 60).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (cpu, wall) = (cpu_time(child.0.id()), Instant::now());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (cpu, wall) = (cpu_time(child.0.id()) - cpu, wall.elapsed());
        assert!(cpu < wall * 3 / 10, "the rendezvous used {cpu:?} of CPU in {wall:?} while out of descriptors");
        idle
    });
    drop(idle);
    // Both ranks still register and get the roster.
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let server = addr.clone();
            std::thread::spawn(move || {
                runtime().block_on(crate::bootstrap::rendezvous::register(
                    &server,
                    rank,
                    2,
                    "test-token",
                    &format!("127.0.0.1:{}", 7000 + rank),
                    Duration::from_secs(30),
                ))
            })
        })
        .collect();
    for (rank, t) in ranks.into_iter().enumerate() {
        let roster = t.join().unwrap();
        assert_eq!(
            roster.as_deref().ok(),
            Some(&["127.0.0.1:7000".to_string(), "127.0.0.1:7001".to_string()][..]),
            "rank {rank}: {roster:?}"
        );
    }
    let served = lines.find_map(|l| l.ok()?.split_once("SERVED ").map(|(_, s)| s.to_string()));
    assert!(served.as_deref().is_some_and(|s| s.starts_with("Ok(")), "the rendezvous ended with {served:?}");
    drop(child);
}

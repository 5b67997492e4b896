//! BSP clock exchange over the network transport against raw TCP between the
//! same processes, measured in the same run.
//!
//! N processes (this binary re-run as ranks) each hold a parameter table of
//! `S` bytes. Per clock every rank pushes deltas for the whole table (split
//! across the N keepers) and receives the fresh rows back: 2·S bytes per rank
//! per clock. The baseline is the same exchange over plain TCP sockets
//! between the same processes: S/N bytes from every worker to every keeper,
//! and once a keeper has them all, S/N bytes back to every worker on the same
//! connection — the same bytes and the same waiting, with no framing, no
//! adding and no copies. Printed: bytes/s (deltas out + rows in, per rank) of
//! each and their ratio (target ≥ 0.7).
//!
//! `cargo bench -p geeps-net --bench exchange` (`-- --quick` for a short run).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use geeps_core::{keys, Config, Geeps, Slack};
use geeps_net::{Addresses, ClusterSpec, NetCluster, NetOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WIDTH: usize = 128;

fn rendezvous(world: usize) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    l.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let l = TcpListener::from_std(l).expect("listener");
            let _ = geeps_net::rendezvous::serve(l, world, String::new(), Duration::from_secs(60)).await;
        })
    });
    addr
}

/// Raw TCP doing the same exchange: every rank connects to every rank (itself
/// included) as a worker and accepts one connection from each as a keeper.
/// Per round a worker sends S/N bytes of "deltas" to every keeper; a keeper
/// that has all N answers each worker with S/N bytes of "rows" on the same
/// connection; the round ends when a worker has every keeper's answer. This
/// is the bytes and the waiting of a BSP clock with nothing done to them: the
/// most the sockets allow for this pattern.
fn raw_rank(rank: usize, world: usize, server: &str, bytes: usize, rounds: usize) -> f64 {
    use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let me = listener.local_addr().expect("addr").to_string();
        let roster = geeps_net::rendezvous::register(server, rank, world, "", &me, Duration::from_secs(60))
            .await
            .expect("roster");
        let accept = tokio::spawn(async move {
            let mut incoming = Vec::new();
            for _ in 0..world {
                let (s, _) = listener.accept().await.expect("accept");
                s.set_nodelay(true).expect("nodelay");
                incoming.push(s);
            }
            incoming
        });
        let mut to_keepers = Vec::new();
        for addr in &roster {
            let s = TcpStream::connect(addr).await.expect("connect");
            s.set_nodelay(true).expect("nodelay");
            to_keepers.push(s);
        }
        let from_workers = accept.await.expect("accepted");
        let chunk = Arc::new(vec![1u8; bytes / world]);
        let n = chunk.len();
        // One long-lived task per socket direction, driven by channels, with
        // buffers reused across rounds: nothing but the socket copies per
        // round. Every task is awaited before the rank exits, so no peer sees
        // a socket close before its last round.
        let mut tasks = Vec::new();
        // Per socket: a reader that reports each received chunk on `done`, and
        // a writer that sends a chunk per message on the returned sender.
        let mut attach = |sockets: Vec<TcpStream>, done: UnboundedSender<()>| -> Vec<UnboundedSender<()>> {
            let mut go = Vec::new();
            for s in sockets {
                let (mut r, mut w) = s.into_split();
                let done = done.clone();
                tasks.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; n];
                    for _ in 0..rounds {
                        r.read_exact(&mut buf).await.expect("read");
                        let _ = done.send(());
                    }
                }));
                let (tx, mut rx) = unbounded_channel::<()>();
                let c = chunk.clone();
                tasks.push(tokio::spawn(async move {
                    while rx.recv().await.is_some() {
                        w.write_all(&c).await.expect("write");
                    }
                }));
                go.push(tx);
            }
            go
        };
        // Keeper: when every worker's deltas are in, answer every worker.
        let (arrived, mut arrivals) = unbounded_channel();
        let answer = attach(from_workers, arrived);
        // Worker: send to every keeper, wait for every answer.
        let (answered, mut answers) = unbounded_channel();
        let send = attach(to_keepers, answered);
        let keeper = tokio::spawn(async move {
            for _ in 0..rounds {
                for _ in 0..world {
                    arrivals.recv().await.expect("arrival");
                }
                for a in &answer {
                    a.send(()).expect("answer");
                }
            }
        });
        let start = Instant::now();
        for _ in 0..rounds {
            for s in &send {
                s.send(()).expect("send");
            }
            for _ in 0..world {
                answers.recv().await.expect("answer");
            }
        }
        let rate = (2 * bytes * rounds) as f64 / start.elapsed().as_secs_f64();
        drop(send);
        keeper.await.expect("keeper");
        for t in tasks {
            t.await.expect("socket task");
        }
        rate
    })
}

/// The transport alone: per clock, push a batch of deltas to every keeper and
/// wait for every keeper's publication of the new age (what the pushers and
/// pullers do for the engine).
fn transport_rank(rank: usize, world: usize, server: &str, bytes: usize, clocks: usize) -> f64 {
    use geeps_core::transport::{DeltaEncoding, Inbound, UpdateBatch};
    use geeps_core::{TableKind, TableSpec};
    let spec = ClusterSpec::new(
        rank,
        world,
        Addresses::Rendezvous { server: server.to_string(), hosted_by_rank0: false },
        NetOptions::default(),
    )
    .with_listen("127.0.0.1");
    let mut cluster = NetCluster::start(spec).expect("cluster");
    let rows = (bytes / (WIDTH * 4)) as u32;
    let transport = cluster.transport();
    let (tx, rx) = std::sync::mpsc::channel();
    let inbox: geeps_core::transport::Inbox = Arc::new(move |m: Inbound| {
        if let Inbound::Rows(p) = m {
            let _ = tx.send(p.age);
        }
    });
    let tables = [TableSpec { name: "w".into(), kind: TableKind::Parameter, rows }];
    transport.join(WIDTH, &tables, inbox).expect("join");
    // Join snapshots: one per keeper.
    for _ in 0..world {
        rx.recv().expect("snapshot");
    }
    let part_rows = |p: usize| (rows as usize * (p + 1) / world) - (rows as usize * p / world);
    let payloads: Vec<bytes::Bytes> =
        (0..world).map(|p| bytes::Bytes::from(vec![0u8; part_rows(p) * WIDTH * 4])).collect();
    let mut start = Instant::now();
    for clock in 0..=clocks as u64 {
        if clock == 1 {
            start = Instant::now();
        }
        for (p, payload) in payloads.iter().enumerate() {
            let batch = UpdateBatch {
                table: 0,
                partition: p as u32,
                worker: rank as u32,
                clock,
                deltas: Some(payload.clone()),
                encoding: DeltaEncoding::F32,
            };
            transport.push(batch).expect("push");
        }
        let mut fresh = 0;
        while fresh < world {
            if rx.recv().expect("publication") == clock + 1 {
                fresh += 1;
            }
        }
    }
    let rate = (2 * bytes * clocks) as f64 / start.elapsed().as_secs_f64();
    transport.leave();
    cluster.shutdown().expect("cluster shutdown");
    rate
}

/// The whole engine: per clock, a full-table update, the clock, and a BSP read.
fn geeps_rank(rank: usize, world: usize, server: &str, bytes: usize, clocks: usize) -> f64 {
    let spec = ClusterSpec::new(
        rank,
        world,
        Addresses::Rendezvous { server: server.to_string(), hosted_by_rank0: false },
        NetOptions::default(),
    )
    .with_listen("127.0.0.1");
    let mut cluster = NetCluster::start(spec).expect("cluster");
    let rows = (bytes / (WIDTH * 4)) as u32;
    let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_device_memory(8 * bytes + (1 << 20)));
    let t = b.parameter_table("w", rows);
    b.transport(cluster.transport());
    let ps = b.build().expect("build");
    let k = keys(t, 0..rows);
    let r = ps.virtual_read(&k, Slack::BSP).expect("record");
    let u = ps.virtual_pre_update(&k).expect("record");
    ps.virtual_update(u).expect("record");
    ps.virtual_post_read(r).expect("record");
    ps.virtual_table_clock(t).expect("record");
    ps.finish_virtual_iteration().expect("finish");
    // One warm-up clock, then the timed ones.
    let mut start = Instant::now();
    for c in 0..=clocks {
        if c == 1 {
            start = Instant::now();
        }
        let read = ps.read(r).expect("read");
        let mut up = ps.pre_update(u).expect("pre_update");
        up.as_mut_slice().expect("host").fill(1.0);
        up.update().expect("update");
        drop(read);
        ps.table_clock(t).expect("clock");
    }
    // The last clock's rows must arrive too.
    ps.read(r).expect("final read").post().expect("post");
    let rate = (2 * bytes * clocks) as f64 / start.elapsed().as_secs_f64();
    ps.shutdown().expect("shutdown");
    cluster.shutdown().expect("cluster shutdown");
    rate
}

fn spawn_ranks(world: usize, role: &str, bytes: usize, rounds: usize) -> Vec<f64> {
    let server = rendezvous(world);
    let exe = std::env::current_exe().expect("exe");
    let children: Vec<_> = (0..world)
        .map(|rank| {
            Command::new(&exe)
                .env("EXCHANGE_ROLE", role)
                .env("EXCHANGE_RANK", rank.to_string())
                .env("EXCHANGE_WORLD", world.to_string())
                .env("EXCHANGE_SERVER", &server)
                .env("EXCHANGE_BYTES", bytes.to_string())
                .env("EXCHANGE_ROUNDS", rounds.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn rank")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("rank output");
            assert!(out.status.success(), "a rank failed");
            String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().expect("rate")
        })
        .collect()
}

fn main() {
    if let Ok(role) = std::env::var("EXCHANGE_ROLE") {
        let var = |k: &str| std::env::var(k).expect(k).parse::<usize>().expect(k);
        let (rank, world, bytes, rounds) =
            (var("EXCHANGE_RANK"), var("EXCHANGE_WORLD"), var("EXCHANGE_BYTES"), var("EXCHANGE_ROUNDS"));
        let server = std::env::var("EXCHANGE_SERVER").expect("server");
        let rate = match role.as_str() {
            "raw" => raw_rank(rank, world, &server, bytes, rounds),
            "transport" => transport_rank(rank, world, &server, bytes, rounds),
            _ => geeps_rank(rank, world, &server, bytes, rounds),
        };
        println!("{rate}");
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick" || a == "--test");
    let (bytes, rounds, repeats) = if quick { (2 << 20, 10, 1) } else { (8 << 20, 30, 3) };
    println!("BSP clock exchange vs the same exchange over raw TCP, {} MiB table, {rounds} clocks, per-rank bytes/s (in + out)", bytes >> 20);
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    for world in [2usize, 4] {
        let mut best = [0.0f64; 3];
        for _ in 0..repeats {
            for (i, role) in ["raw", "transport", "engine"].iter().enumerate() {
                best[i] = best[i].max(mean(spawn_ranks(world, role, bytes, rounds)));
            }
        }
        println!(
            "  {world} processes: raw TCP {:7.1} MB/s | geeps transport {:7.1} MB/s ({:.2}x) | whole engine {:7.1} MB/s ({:.2}x)",
            best[0] / 1e6,
            best[1] / 1e6,
            best[1] / best[0],
            best[2] / 1e6,
            best[2] / best[0]
        );
    }
}

//! Bad input on the wire is rejected with an error frame (and a log line),
//! never a panic or a crash of the keeper: the same keeper accepts a good
//! worker after every bad one.

//! (A unit test module: it speaks the wire protocol, which is internal.)

use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::wire::frame::{read_frame, write_frame};
use crate::wire::{Body, DeclaredKind, Encoding, Header, Hello, TableDecl, UpdateHeader, PROTOCOL_VERSION};
use crate::{ClusterSpec, NetCluster, NetOptions};

fn hello(rank: u32, token: &str, rows: u32) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        token: token.into(),
        rank,
        world: 2,
        row_width: 4,
        tables: vec![TableDecl { name: "w".into(), kind: DeclaredKind::Parameter.into(), rows }],
        host: String::new(),
        stripes: 1,
    }
}

async fn join(addr: &str, h: Hello) -> (TcpStream, Option<Body>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    write_frame(&mut s, Header::new(Body::Hello(h)), None).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut s, 1 << 20)).await.unwrap();
    (s, reply.ok().and_then(|(h, _)| h.body))
}

async fn next_failure(s: &mut TcpStream) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), read_frame(s, 1 << 20)).await.unwrap() {
            Ok((Header { body: Some(Body::Failure(f)), .. }, _)) => return f.message,
            Ok(_) => continue, // publications, pings
            Err(e) => panic!("connection ended instead of a failure frame: {e}"),
        }
    }
}

fn update(table: u32, clock: u64, has_deltas: bool) -> Header {
    Header::new(Body::Update(UpdateHeader { table, partition: 0, worker: 1, clock, has_deltas, ..Default::default() }))
}

#[test]
fn keeper_rejects_bad_input_and_keeps_serving() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let options = NetOptions::default()
        .with_token("test-token")
        .with_peer_timeout(Duration::from_secs(10))
        .with_connect_timeout(Duration::from_secs(10))
        .with_heartbeat(Duration::from_millis(200))
        .with_shutdown_timeout(Duration::from_secs(1));
    let spec = ClusterSpec::fixed(0, vec![addr.clone(), "127.0.0.1:9".into()], options);
    let mut cluster = NetCluster::start(spec).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut rejoined = rt.block_on(async {
        // Wrong token and wrong protocol: refused with the reason.
        let (_, r) = join(&addr, hello(1, "wrong", 4)).await;
        assert!(matches!(&r, Some(Body::Refused(x)) if x.reason.contains("token")), "{r:?}");
        let (_, r) = join(&addr, Hello { protocol: 99, ..hello(1, "test-token", 4) }).await;
        assert!(matches!(&r, Some(Body::Refused(x)) if x.reason.contains("protocol")), "{r:?}");
        let (_, r) = join(&addr, Hello { rank: 7, ..hello(1, "test-token", 4) }).await;
        assert!(matches!(&r, Some(Body::Refused(x)) if x.reason.contains("rank 7")), "{r:?}");
        let (_, r) = join(&addr, Hello { stripes: 3, ..hello(1, "test-token", 4) }).await;
        assert!(
            matches!(&r, Some(Body::Refused(x)) if x.reason.contains("3 stripes per keeper but this keeper has 1; give every rank the same GEEPS_STRIPES")),
            "{r:?}"
        );

        // A truncated first frame, and garbage: the connection is dropped.
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&[9, 0]).await.unwrap();
        drop(s);
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&[3, 0, 0, 0, 0xff, 0xff, 0xff]).await.unwrap();
        assert!(read_frame(&mut s, 1 << 20).await.is_err());

        // A good worker joins.
        let (mut s, r) = join(&addr, hello(1, "test-token", 4)).await;
        assert!(matches!(r, Some(Body::Welcome(_))), "{r:?}");
        // Another worker with other tables is refused.
        let (_, r) = join(&addr, hello(0, "test-token", 5)).await;
        assert!(matches!(&r, Some(Body::Refused(x)) if x.reason.contains("tables")), "{r:?}");
        // The joined worker hears of the refusal: the cluster cannot run without rank 0.
        assert!(next_failure(&mut s).await.contains("tables"));

        // Unknown table, wrong payload length, out-of-order clock: failure frames.
        write_frame(&mut s, update(9, 0, false), None).await.unwrap();
        assert!(next_failure(&mut s).await.contains("unknown table 9"));
        write_frame(&mut s, update(0, 0, true), Some(&Bytes::from_static(&[1, 2, 3]))).await.unwrap();
        assert!(next_failure(&mut s).await.contains("bytes"));
        write_frame(&mut s, update(0, 5, false), None).await.unwrap();
        assert!(next_failure(&mut s).await.contains("clock"));

        // bf16 deltas (partition 0 holds 2 rows of 4 floats: 16 bytes): an
        // odd length, the f32 length, an unknown encoding, bf16 without deltas.
        let encoded = |encoding: u32, has_deltas: bool| {
            Header::new(Body::Update(UpdateHeader {
                table: 0,
                partition: 0,
                worker: 1,
                clock: 0,
                has_deltas,
                encoding,
            }))
        };
        write_frame(&mut s, encoded(Encoding::Bf16.into(), true), Some(&Bytes::from(vec![0; 15]))).await.unwrap();
        let m = next_failure(&mut s).await;
        assert!(m.contains("bf16 deltas of 15 bytes for a partition of 8 floats: expected 16 (2 bytes each)"), "{m}");
        write_frame(&mut s, encoded(Encoding::Bf16.into(), true), Some(&Bytes::from(vec![0; 32]))).await.unwrap();
        let m = next_failure(&mut s).await;
        assert!(
            m.contains("table 0 partition 0: bf16 deltas of 32 bytes for a partition of 8 floats: expected 16"),
            "{m}"
        );
        write_frame(&mut s, encoded(7, true), Some(&Bytes::from(vec![0; 16]))).await.unwrap();
        let m = next_failure(&mut s).await;
        assert!(m.contains("unknown encoding 7"), "{m}");
        write_frame(&mut s, encoded(Encoding::Bf16.into(), false), None).await.unwrap();
        let m = next_failure(&mut s).await;
        assert!(m.contains("batch without deltas says its deltas are bf16"), "{m}");

        // An oversized message: the keeper drops the connection without reading it.
        let mut h = update(0, 0, true);
        h.payload_len = 1 << 40;
        let mut head = (h.encoded_len() as u32).to_le_bytes().to_vec();
        h.encode(&mut head).unwrap();
        s.write_all(&head).await.unwrap();
        while tokio::time::timeout(Duration::from_secs(5), read_frame(&mut s, 1 << 20)).await.unwrap().is_ok() {}

        // The keeper still serves: rank 1 may join again.
        let (s, r) = join(&addr, hello(1, "test-token", 4)).await;
        assert!(matches!(r, Some(Body::Welcome(_))), "{r:?}");
        s
    });
    drop(cluster.transport());
    // Rank 0's own worker never joined: shutdown does not wait for rank 1
    // (it could never finish without rank 0) but tells it rank 0 is gone.
    let start = std::time::Instant::now();
    cluster.shutdown().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5), "shutdown waited {:?}", start.elapsed());
    let told = rt.block_on(next_failure(&mut rejoined));
    assert!(told.contains("rank 0 stopped before its worker joined"), "{told}");
}

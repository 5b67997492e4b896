//! Entry points for the fuzz targets in `geeps-net/fuzz` (cargo feature
//! `fuzzing`, off by default; hidden from the documentation and not part of
//! the API). Each function takes arbitrary bytes, hands them to the code that
//! decodes what a peer sends — the frame reader, the prost headers, a
//! keeper's handshake and update handling, the rendezvous — and must never
//! panic, hang or allocate without bound, whatever the bytes. Where a decoder
//! returns a `Result`, both arms are fine; what they return is checked
//! against the frame layout where that is cheap (lengths, consumed bytes,
//! round trips).

use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use geeps_core::keeper::KeeperShard;
use geeps_core::{TableKind, TableSpec};
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpSocket};

use crate::keeper::{batch_of, KeeperService};
use crate::options::NetOptions;
use crate::security::auth::token_matches;
use crate::wire::bf16 as bf16_wire;
use crate::wire::frame::{read_frame, read_frame_within, write_frame, FrameError, MAX_HEADER_BYTES};
use crate::wire::recv_pool::RecvPool;
use crate::wire::{Body, Encoding, FailureKind, Header, Register, PROTOCOL_VERSION};

/// Separates the byte streams of the connections in one input of the
/// [`keeper`] and [`rendezvous`] targets.
pub const SPLIT: &[u8] = b"\xf0\x0d\xf0\x0d";

/// The token of the keepers and rendezvous the targets talk to, when the
/// input's first byte asks for one (otherwise the token is empty).
pub const TOKEN: &str = "fuzz-token";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime"))
}

/// At most `max` streams of `data`, separated by [`SPLIT`].
fn streams(data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while out.len() + 1 < max {
        match rest.windows(SPLIT.len()).position(|w| w == SPLIT) {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + SPLIT.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

/// An in-memory peer that hands out its bytes in chunks of the sizes in
/// `chunks` (cycled), answering `Pending` once before every chunk when
/// `stall` is set: the reads a slow TCP connection makes.
struct Chunked<'a> {
    data: &'a [u8],
    pos: usize,
    chunks: Vec<usize>,
    turn: usize,
    stall: bool,
    stalled: bool,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.stall && !me.stalled {
            me.stalled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        me.stalled = false;
        let chunk = me.chunks[me.turn % me.chunks.len()];
        me.turn += 1;
        let n = chunk.min(buf.remaining()).min(me.data.len() - me.pos);
        buf.put_slice(&me.data[me.pos..me.pos + n]);
        me.pos += n;
        Poll::Ready(Ok(()))
    }
}

/// The frame reader on a stream of frames: `data[0]` picks the limits (a
/// peer in its handshake, an authenticated peer with the default 1 GiB
/// payload limit, or a 4 KiB one) and how the bytes arrive, `data[1..4]`
/// the chunk sizes; the rest is the stream. Frames are read until the first
/// error. Checks that a frame is returned only when its declared lengths are
/// within the limits, that exactly the frame's bytes are consumed (never a
/// byte of the next frame), and that `Closed` comes only at a frame boundary.
pub fn frames(data: &[u8]) {
    let Some((&[mode, c0, c1, c2], stream)) = data.split_first_chunk::<4>() else { return };
    let (max_header, max_payload) = match mode % 3 {
        0 => (NetOptions::default().max_handshake_bytes as usize, 0),
        1 => (MAX_HEADER_BYTES, NetOptions::default().max_message_bytes),
        _ => (MAX_HEADER_BYTES, 4096),
    };
    let chunks = [c0, c1, c2].iter().map(|&c| 1 + c as usize).collect();
    let mut r = Chunked { data: stream, pos: 0, chunks, turn: 0, stall: mode & 0x80 != 0, stalled: false };
    runtime().block_on(async {
        loop {
            let start = r.pos;
            let declared = stream.get(start..start + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
            match read_frame_within(&mut r, max_header, max_payload).await {
                Ok((header, payload)) => {
                    let head_len = declared.expect("a frame without a length prefix");
                    assert!(head_len <= max_header, "header of {head_len} bytes over the limit {max_header}");
                    assert!(header.payload_len <= max_payload, "payload over the limit");
                    assert_eq!(payload.len() as u64, header.payload_len, "payload length differs from the header's");
                    assert_eq!(r.pos - start, 4 + head_len + payload.len(), "the reader consumed past its frame");
                    assert_eq!(&payload[..], &stream[start + 4 + head_len..r.pos]);
                }
                Err(FrameError::Closed) => {
                    assert_eq!(start, stream.len(), "Closed in the middle of the stream");
                    break;
                }
                Err(FrameError::Truncated(_)) => {
                    assert_eq!(r.pos, stream.len(), "Truncated before the end of the stream");
                    break;
                }
                Err(FrameError::HeaderTooLarge { len, limit }) => {
                    assert!(len > limit && Some(len) == declared);
                    break;
                }
                Err(FrameError::PayloadTooLarge { len, limit }) => {
                    assert!(len > limit);
                    break;
                }
                Err(e) => {
                    let _ = e.to_string();
                    break;
                }
            }
        }
    });
}

/// One frame header as prost decodes it. A decoded header must encode to
/// bytes that decode and encode to the same bytes (the keeper and the workers
/// re-encode what they forward), its `Debug` form is what the keeper logs
/// for an unexpected frame, and the token a hello or registration carries is
/// compared with the cluster's in constant time: that comparison must agree
/// with `==`.
pub fn header(data: &[u8]) {
    let Ok(h) = Header::decode(data) else { return };
    let _ = format!("{:?}", h.body);
    let encoded = h.encode_to_vec();
    assert_eq!(encoded.len(), h.encoded_len());
    // Compared as bytes: a header may carry floats (a worker's status), and
    // a NaN is not equal to itself.
    let again = Header::decode(&encoded[..]).map(|h| h.encode_to_vec());
    assert_eq!(again.as_ref(), Ok(&encoded), "re-encoded header decodes differently");
    let token = match &h.body {
        Some(Body::Hello(hello)) => &hello.token,
        Some(Body::Register(reg)) => &reg.token,
        _ => return,
    };
    assert_eq!(token_matches(TOKEN, token), token == TOKEN);
    assert!(token_matches(token, token));
}

/// Update batches against the keeper logic: `data[0]` gives the world size
/// (1 to 4) and this shard, `data[1]` the row width (1 to 8), `data[2..6]`
/// up to four tables (kind and rows, 0 to 31); the rest is a stream of
/// frames as a worker sends them, read with a 64 KiB payload limit. Each
/// update frame becomes the batch the keeper service makes of it
/// (`keeper_service::batch_of`: a frame it refuses is skipped), a `Leave`
/// departs its rank. A
/// rejected batch must change nothing; a publication carries exactly the
/// partition's rows.
pub fn updates(data: &[u8]) {
    let Some((&[w, width, t0, t1, t2, t3], stream)) = data.split_first_chunk::<6>() else {
        return;
    };
    let world = 1 + (w & 3) as usize;
    let shard = ((w >> 2) & 3) as usize % world;
    let row_width = 1 + (width & 7) as usize;
    let tables: Vec<TableSpec> = [t0, t1, t2, t3]
        .iter()
        .take(1 + ((w >> 4) & 3) as usize)
        .enumerate()
        .map(|(i, &t)| TableSpec {
            name: format!("t{i}"),
            kind: if t & 0x80 != 0 { TableKind::Local } else { TableKind::Parameter },
            rows: (t & 31) as u32,
        })
        .collect();
    let mut keeper = KeeperShard::new(shard, world, world, row_width, &tables);
    // A partition's size in bytes, as the keeper allocated it.
    let sizes: Vec<usize> = (0..tables.len() as u32).map(|t| keeper.rows(t).map_or(0, |r| r.len())).collect();
    let partition_bytes = |t: u32| sizes[t as usize];
    let mut r = stream;
    runtime().block_on(async {
        while let Ok((h, payload)) = read_frame(&mut r, 64 << 10).await {
            match h.body {
                Some(Body::Update(u)) => {
                    let before =
                        (u.table as usize) < tables.len() && tables[u.table as usize].kind == TableKind::Parameter;
                    let old = before.then(|| keeper.rows(u.table)).flatten();
                    let Ok(batch) = batch_of(&u, payload) else { continue };
                    match keeper.apply(&batch) {
                        Ok(Some(p)) => assert_eq!(p.rows.len(), partition_bytes(p.table)),
                        Ok(None) => {}
                        Err(e) => {
                            let _ = e.to_string();
                            if let Some(old) = old {
                                assert_eq!(keeper.rows(u.table), Some(old), "a rejected batch changed the rows");
                            }
                        }
                    }
                }
                Some(Body::Leave(l)) if (l.rank as usize) < world => {
                    for p in keeper.depart(l.rank as usize) {
                        assert_eq!(p.rows.len(), partition_bytes(p.table));
                    }
                }
                _ => {}
            }
        }
    });
}

/// Writes `stream` on a fresh connection to `addr`, closes the writing
/// side, and reads whatever comes back until the peer closes. Closed with a
/// reset (linger 0) so that many executions leave no sockets in TIME_WAIT.
async fn session(addr: std::net::SocketAddr, stream: Vec<u8>) -> Vec<u8> {
    let socket = TcpSocket::new_v4().expect("socket");
    let _ = socket.set_zero_linger();
    let Ok(mut conn) = socket.connect(addr).await else { return Vec::new() };
    let (mut rd, mut wr) = conn.split();
    let mut answer = Vec::new();
    // Write and read at once: a keeper may answer (publications) before it
    // has read everything.
    let write = async {
        let _ = wr.write_all(&stream).await;
        let _ = wr.shutdown().await;
    };
    let read = async {
        let _ = rd.read_to_end(&mut answer).await;
    };
    tokio::join!(write, read);
    answer
}

/// A keeper service, exactly as a process hosts it, talked to over loopback
/// TCP: `data[0]` gives the world size (1 to 4), the keeper's shard and
/// whether the cluster has a token ([`TOKEN`]) or none; the rest holds up to
/// four byte streams separated by [`SPLIT`], each sent on its own connection
/// (all at once) as a worker would: hello, then update batches, pings, a
/// leave... Every connection must be answered and closed by the keeper once
/// its peer has stopped sending (the keeper's own timeouts are not waited
/// for); the keeper must never panic.
pub fn keeper(data: &[u8]) {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let world = 1 + (cfg & 3) as usize;
    let shard = ((cfg >> 2) & 3) as usize % world;
    let token = if cfg & 0x10 != 0 { TOKEN } else { "" };
    let opts = NetOptions::default().with_token(token).with_max_message_bytes(1 << 20);
    let streams = streams(rest, 4);
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let service = KeeperService::new(shard, world, opts, None);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(service.serve(listener, stopped));
        let mut sessions = tokio::task::JoinSet::new();
        for s in streams {
            sessions.spawn(session(addr, s.to_vec()));
        }
        let all = async { while sessions.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(30), all).await.is_err() {
            panic!("the keeper left a connection open 30 s after its peer stopped sending");
        }
        let _ = stop.send(true);
        let _ = server.await;
    });
}

/// The registration a stream starts with, as the rendezvous will read it,
/// if it is one for a rank of `world` with the cluster `token` (without it,
/// the rendezvous takes the stream for a stranger's and still waits for
/// that rank).
fn claimed_rank(stream: &[u8], limit: usize, world: usize, token: &str) -> Option<usize> {
    let len = u32::from_le_bytes(stream.get(..4)?.try_into().ok()?) as usize;
    if len > limit {
        return None;
    }
    match Header::decode(stream.get(4..4 + len)?).ok()? {
        Header { payload_len: 0, body: Some(Body::Register(r)) }
            if (r.rank as usize) < world && token_matches(token, &r.token) =>
        {
            Some(r.rank as usize)
        }
        _ => None,
    }
}

/// How long the rendezvous target's server waits for its ranks. The harness
/// registers every rank no stream does, so a correct run ends in
/// milliseconds; an input that finds a wait it missed costs this, well
/// under libFuzzer's hang limit (`-timeout=10` in CI), not 10 s of it.
const RENDEZVOUS_WAIT: Duration = Duration::from_secs(1);

/// How long the target's client keeps trying to register. Its fake
/// rendezvous accepts once, so after an answer that is not one every try
/// is refused until this runs out; the answer itself is read within 1 s
/// whatever this is.
const REGISTER_WAIT: Duration = Duration::from_millis(200);

fn registration(rank: usize, world: usize, token: &str) -> Vec<u8> {
    let reg = Register {
        protocol: PROTOCOL_VERSION,
        token: token.to_string(),
        rank: rank as u32,
        world: world as u32,
        address: format!("127.0.0.1:{}", 40000 + rank),
    };
    let h = Header::new(Body::Register(reg));
    let mut out = (h.encoded_len() as u32).to_le_bytes().to_vec();
    h.encode(&mut out).expect("encode");
    out
}

/// The rendezvous, both sides, over loopback TCP. `data[0]` bit 5 picks the
/// side. Server: `data[0]` gives the world size (1 to 4) and whether there
/// is a token; up to four byte streams separated by [`SPLIT`] connect at
/// once, and every rank none of them registers (as far as the harness can
/// tell) is registered properly, so the rendezvous ends without waiting for
/// its timeout: with the roster, or with every rank told why the start
/// failed. Client: a rank registers with a rendezvous that answers the bytes
/// after `data[0]`; `register` must return (roster or error), never panic.
pub fn rendezvous(data: &[u8]) {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let world = 1 + (cfg & 3) as usize;
    let token = if cfg & 0x10 != 0 { TOKEN } else { "" };
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        if cfg & 0x20 != 0 {
            // The client side: a fake rendezvous reads the registration and
            // answers with the fuzzed bytes.
            let answer = rest.to_vec();
            let server = tokio::spawn(async move {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                let _ = conn.set_zero_linger();
                let _ = read_frame(&mut conn, 0).await;
                let _ = conn.write_all(&answer).await;
                let _ = conn.shutdown().await;
            });
            let rank = ((cfg >> 2) & 3) as usize % world;
            let got = crate::bootstrap::rendezvous::register(
                &addr.to_string(),
                rank,
                world,
                token,
                "127.0.0.1:1",
                REGISTER_WAIT,
            )
            .await;
            if let Ok(roster) = got {
                assert_eq!(roster.len(), world, "a roster of another world size was accepted");
            }
            let _ = server.await;
            return;
        }
        let opts = NetOptions::default().with_token(token).with_connect_timeout(RENDEZVOUS_WAIT);
        let limit = opts.max_handshake_bytes as usize;
        let streams = streams(rest, 4);
        let mut claimed = vec![false; world];
        for s in &streams {
            if let Some(r) = claimed_rank(s, limit, world, token) {
                claimed[r] = true;
            }
        }
        let served = tokio::spawn(crate::bootstrap::rendezvous::serve_with(listener, world, opts));
        let mut sessions = tokio::task::JoinSet::new();
        for s in streams {
            sessions.spawn(session(addr, s.to_vec()));
        }
        for rank in (0..world).filter(|&r| !claimed[r]) {
            sessions.spawn(session(addr, registration(rank, world, token)));
        }
        match tokio::time::timeout(Duration::from_secs(30), served).await {
            Ok(Ok(Ok(roster))) => assert_eq!(roster.len(), world),
            Ok(Ok(Err(e))) => {
                let _ = e.to_string();
            }
            Ok(Err(join)) => std::panic::resume_unwind(join.into_panic()),
            Err(_) => panic!("the rendezvous did not end within 30 s"),
        }
        sessions.abort_all();
        while sessions.join_next().await.is_some() {}
    });
}

/// Frames as the worker side writes them, for seed inputs: `header` framed
/// with `payload`.
pub(crate) fn frame_bytes(header: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let payload = Bytes::copy_from_slice(payload);
    let p = (!payload.is_empty()).then_some(&payload);
    runtime().block_on(write_frame(&mut out, header, p)).expect("write to a vector");
    out
}

/// Seed inputs for every target: valid sessions, registrations and frames,
/// from which the fuzzer mutates. `(target, input)` pairs.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use crate::wire::table_decls;
    use crate::wire::{Hello, Leave, Ping, PublishHeader, Refused, Roster, UpdateHeader, Welcome};
    let tables = vec![
        TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 5 },
        TableSpec { name: "scratch".into(), kind: TableKind::Local, rows: 3 },
    ];
    let hello = |rank: u32, world: u32, token: &str| Hello {
        protocol: PROTOCOL_VERSION,
        token: token.into(),
        rank,
        world,
        row_width: 2,
        tables: table_decls(&tables),
        host: String::new(),
        stripes: 1,
    };
    let update = |worker: u32, partition: u32, clock: u64, deltas: Option<&[u8]>| {
        let u = UpdateHeader {
            table: 0,
            partition,
            worker,
            clock,
            has_deltas: deltas.is_some(),
            encoding: Encoding::F32.into(),
        };
        frame_bytes(Header::new(Body::Update(u)), deltas.unwrap_or(&[]))
    };
    // The same, with the deltas as bf16 (as a rank with the bf16 wire sends them).
    let update_bf16 = |worker: u32, partition: u32, clock: u64, deltas: &[u8]| {
        let u = UpdateHeader { table: 0, partition, worker, clock, has_deltas: true, encoding: Encoding::Bf16.into() };
        let encoded = bf16_wire::encode(Some(deltas), &mut Vec::new(), &RecvPool::new(0))
            .expect("whole floats")
            .unwrap_or_default();
        frame_bytes(Header::new(Body::Update(u)), &encoded)
    };
    let floats = |n: usize| (0..n).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect::<Vec<u8>>();
    let bodies = [
        Body::Hello(hello(1, 2, TOKEN)),
        Body::Welcome(Welcome { shard: 1, shm_name: String::new() }),
        Body::Refused(Refused { reason: "no".into() }),
        Body::Update(UpdateHeader {
            table: 0,
            partition: 0,
            worker: 1,
            clock: 3,
            has_deltas: true,
            encoding: Encoding::Bf16.into(),
        }),
        Body::Publish(PublishHeader { table: 0, partition: 1, age: 2, included: vec![2, 3], ..Default::default() }),
        Body::Leave(Leave { rank: 1 }),
        Body::Failure(crate::wire::Failure {
            kind: FailureKind::PeerLost.into(),
            rank: 1,
            address: "h:1".into(),
            message: "lost".into(),
        }),
        Body::Ping(Ping {}),
        Body::Register(Register { protocol: 1, token: TOKEN.into(), rank: 0, world: 2, address: "h:2".into() }),
        Body::Roster(Roster { addresses: vec!["a:1".into(), "b:2".into()] }),
        Body::Drain(crate::wire::Drain {}),
        Body::Checkpoint(crate::wire::CheckpointRequest { sequence: 3 }),
    ];
    let mut out = Vec::new();
    let mut all_frames = Vec::new();
    for (i, b) in bodies.iter().enumerate() {
        let mut h = Header::new(b.clone());
        h.payload_len = if i == 4 { 8 } else { 0 };
        out.push(("header", h.encode_to_vec()));
        let f = frame_bytes(Header::new(b.clone()), if i == 4 { &[1; 8] } else { &[] });
        all_frames.extend_from_slice(&f);
    }
    for mode in [0u8, 1, 2, 0x81] {
        let mut input = vec![mode, 3, 0, 200];
        input.extend_from_slice(&all_frames);
        out.push(("frames", input));
    }
    // World 2, shard 0, one parameter table of 5 rows (3 on shard 0), width 2.
    let mut upd = vec![0x01, 0x01, 5, 0x83, 0, 0];
    for clock in 0..3 {
        upd.extend(update(0, 0, clock, Some(&floats(6))));
        upd.extend(update(1, 0, clock, (clock != 1).then_some(&floats(6)[..])));
    }
    upd.extend(update(0, 0, 3, Some(&floats(5))));
    upd.extend(update_bf16(1, 0, 3, &floats(6)));
    upd.extend(update_bf16(0, 0, 3, &floats(6)));
    upd.extend(frame_bytes(Header::new(Body::Leave(Leave { rank: 1 })), &[]));
    out.push(("updates", upd));
    // A keeper of world 2, shard 0: rank 0 and rank 1 join, update, leave.
    for (cfg, token) in [(0x01u8, ""), (0x11, TOKEN)] {
        let mut input = vec![cfg];
        for rank in 0..2u32 {
            if rank > 0 {
                input.extend_from_slice(SPLIT);
            }
            input.extend(frame_bytes(Header::new(Body::Hello(hello(rank, 2, token))), &[]));
            input.extend(update(rank, 0, 0, Some(&floats(6))));
            input.extend(frame_bytes(Header::new(Body::Ping(Ping {})), &[]));
            input.extend(update_bf16(rank, 0, 1, &floats(6)));
            input.extend(update(rank, 0, 2, None));
            input.extend(frame_bytes(Header::new(Body::Leave(Leave { rank })), &[]));
        }
        out.push(("keeper", input));
    }
    // Rendezvous server: world 2, both ranks from the input; then a bad token.
    for (cfg, token) in [(0x01u8, ""), (0x11, TOKEN), (0x11, "wrong")] {
        let mut input = vec![cfg];
        input.extend(registration(0, 2, token));
        input.extend_from_slice(SPLIT);
        input.extend(registration(1, 2, token));
        out.push(("rendezvous", input));
    }
    // Rendezvous client: a roster, a refusal.
    let mut input = vec![0x21];
    input.extend(frame_bytes(Header::new(Body::Roster(Roster { addresses: vec!["a:1".into(), "b:2".into()] })), &[]));
    out.push(("rendezvous", input));
    let mut input = vec![0x21];
    input.extend(frame_bytes(Header::new(Body::Refused(Refused { reason: "token".into() })), &[]));
    out.push(("rendezvous", input));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed runs clean through its target (what the fuzzers start from).
    #[test]
    fn every_seed_runs_clean() {
        for (target, input) in seeds() {
            match target {
                "frames" => frames(&input),
                "header" => header(&input),
                "updates" => updates(&input),
                "keeper" => keeper(&input),
                "rendezvous" => rendezvous(&input),
                other => panic!("seed for unknown target {other}"),
            }
        }
    }

    /// The seed corpus the fuzz targets start from
    /// (`geeps-net/fuzz/seeds/<target>/seed-NN`) holds exactly these seeds
    /// (plus inputs fuzzing found, kept under other names). With
    /// `GEEPS_WRITE_SEEDS=1` it rewrites them instead of checking.
    #[test]
    fn checked_in_seeds_are_current() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
        let write = std::env::var("GEEPS_WRITE_SEEDS").is_ok_and(|v| v == "1");
        for (i, (target, input)) in seeds().into_iter().enumerate() {
            let path = root.join(target).join(format!("seed-{i:02}"));
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, input).unwrap();
            } else {
                let on_disk = std::fs::read(&path).unwrap_or_default();
                assert!(on_disk == input, "{} is stale: run with GEEPS_WRITE_SEEDS=1", path.display());
            }
        }
    }
}

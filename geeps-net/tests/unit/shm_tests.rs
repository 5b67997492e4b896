//! Tests of the shared-memory transport: the ring on its own (wraparound,
//! corruption), the stream halves over a real doorbell socket (frames larger
//! than the ring, a writer parked on a full ring, a reader asleep and woken,
//! a peer gone mid-frame), the segment's checks, and whole clusters whose
//! same-host connections go through shared memory, stay on TCP when it is
//! off, and fall back to TCP when the segment cannot be opened.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use crate::shm::ring::{Consumer, Producer, Ring};
use crate::shm::segment::{Segment, MIN_RING};
use crate::shm::stream::{sides, ShmRead, ShmWrite};
use crate::test_rendezvous::{bsp_rank, BspRun};
use crate::wire::frame::{read_frame_pooled, write_frame, FrameError};
use crate::wire::recv_pool::RecvPool;
use crate::wire::{Body, Header, Ping};
use crate::NetOptions;

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

fn noop_cx() -> Waker {
    Waker::from(Arc::new(Noop))
}

/// The bytes 0, 1, 2, ... of a stream, from `at` on.
fn pattern(at: usize, n: usize) -> Vec<u8> {
    (at..at + n).map(|i| (i % 251) as u8).collect()
}

#[test]
fn ring_wraps_around_in_odd_pieces_and_keeps_every_byte_in_order() {
    let seg = Arc::new(Segment::anonymous(MIN_RING));
    let mut p = Producer::new(Ring::new(seg.clone(), 0));
    let mut c = Consumer::new(Ring::new(seg, 0));
    let (mut sent, mut got) = (0usize, 0usize);
    let mut out = vec![0u8; 7000];
    // About ten times around the ring, in pieces that never divide it.
    while got < 10 * MIN_RING {
        let piece = pattern(sent, 4093);
        let n = p.write(&[IoSlice::new(&piece[..2000]), IoSlice::new(&piece[2000..])]).unwrap();
        sent += n;
        let m = c.read(&mut out).unwrap();
        assert_eq!(out[..m], pattern(got, m)[..], "bytes {got}..{}", got + m);
        got += m;
    }
    // Full: nothing more fits until the reader takes some.
    let fill = pattern(sent, MIN_RING * 2);
    sent += p.write(&[IoSlice::new(&fill)]).unwrap();
    assert_eq!(p.free().unwrap(), 0);
    assert_eq!(p.write(&[IoSlice::new(&[1])]).unwrap(), 0);
    assert_eq!(c.available().unwrap() as usize, sent - got);
}

#[test]
fn a_scribbled_position_is_corruption_not_a_read_outside_the_ring() {
    let seg = Arc::new(Segment::anonymous(MIN_RING));
    let mut c = Consumer::new(Ring::new(seg.clone(), 1));
    let p = Producer::new(Ring::new(seg.clone(), 1));
    // The producer's tail, as a hostile peer would set it: far past the ring.
    let (ctrl, _) = seg.ring_offsets(1);
    seg.word(ctrl).store(u64::MAX / 2, std::sync::atomic::Ordering::SeqCst);
    let e = c.read(&mut [0u8; 16]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("shared-memory ring corrupt"), "{e}");
    seg.word(ctrl + 128).store(7, std::sync::atomic::Ordering::SeqCst);
    assert!(p.free().is_err());
}

#[test]
fn a_segment_is_opened_only_when_it_is_whole_and_named_like_ours() {
    let dir = std::env::temp_dir().join(format!("geeps-shm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (seg, created) = Segment::create(&dir, 100_000).unwrap();
    let opened = Segment::open(&dir, &created.name).unwrap().expect("our own segment opens");
    assert_eq!((opened.nonce(), opened.ring_bytes()), (seg.nonce(), seg.ring_bytes()));
    assert_ne!(seg.nonce(), 0);
    // Absent: cannot be opened, not an error.
    assert!(Segment::open(&dir, "geeps-1-00").unwrap().is_none());
    // Not a name we make: refused before any file is touched.
    assert!(Segment::open(&dir, "../etc/passwd").is_err());
    // Short and foreign files are errors that say what is wrong.
    std::fs::write(dir.join("geeps-short"), [0u8; 100]).unwrap();
    assert!(Segment::open(&dir, "geeps-short").unwrap_err().contains("shorter than its header"));
    std::fs::write(dir.join("geeps-foreign"), vec![0u8; 8192]).unwrap();
    assert!(Segment::open(&dir, "geeps-foreign").unwrap_err().contains("no geeps header"));
    // Cut short after its header: the size no longer matches the rings.
    let path = dir.join(&created.name);
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(8192).unwrap();
    assert!(Segment::open(&dir, &created.name).unwrap_err().contains("does not hold two rings"));
    created.unlink();
    assert!(!path.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Both ends of one connection over an anonymous segment with rings of
/// `ring` bytes and a real loopback socket as the doorbell.
async fn pair(ring: usize) -> ((ShmRead, ShmWrite), (ShmRead, ShmWrite)) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (a, (b, _)) = (a.unwrap(), b.unwrap());
    // As the transport's connections: no Nagle delay on the doorbell's bytes.
    a.set_nodelay(true).unwrap();
    b.set_nodelay(true).unwrap();
    let seg = Arc::new(Segment::anonymous(ring));
    let (ar, aw) = a.into_split();
    let (br, bw) = b.into_split();
    (sides(seg.clone(), true, br, bw), sides(seg, false, ar, aw))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_many_times_larger_than_the_ring_stream_through_it_both_ways() {
    let ((kr, kw), (wr, ww)) = pair(MIN_RING).await;
    let payload = Bytes::from(pattern(0, 20 * MIN_RING + 13));
    let frames = 5;
    // Each direction: one task writes, another reads, at once.
    let send = |mut w: ShmWrite, p: Bytes| {
        tokio::spawn(async move {
            for _ in 0..frames {
                write_frame(&mut w, Header::new(Body::Ping(Ping {})), Some(&p)).await.unwrap();
            }
            w.shutdown().await.unwrap();
            w
        })
    };
    let recv = |mut r: ShmRead, p: Bytes| {
        tokio::spawn(async move {
            let pool = RecvPool::new(1);
            for _ in 0..frames {
                let (h, got) = read_frame_pooled(&mut r, 1 << 30, &pool).await.unwrap();
                assert_eq!(h.body, Some(Body::Ping(Ping {})));
                assert!(got == p, "payload differs");
            }
            // The writer closed: the end of the stream at a frame boundary.
            assert!(matches!(read_frame_pooled(&mut r, 1 << 30, &pool).await, Err(FrameError::Closed)));
            r
        })
    };
    let tasks = [send(kw, payload.clone()), send(ww, payload.clone())];
    let readers = [recv(wr, payload.clone()), recv(kr, payload)];
    for t in tasks {
        t.await.unwrap();
    }
    for t in readers {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_parked_on_a_full_ring_is_woken_when_the_reader_takes_bytes() {
    let ((_kr, mut kw), (mut wr, _ww)) = pair(MIN_RING).await;
    kw.write_all(&pattern(0, MIN_RING)).await.unwrap();
    // The ring is full: the next write parks (one poll, no clock involved).
    let waker = noop_cx();
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut kw).poll_write(&mut cx, &[9; 10]).is_pending());
    // The reader takes the ring's bytes; the parked writer gets its doorbell.
    let writer = tokio::spawn(async move {
        kw.write_all(&pattern(MIN_RING, 3 * MIN_RING)).await.unwrap();
        kw
    });
    let mut all = vec![0u8; 4 * MIN_RING];
    wr.read_exact(&mut all).await.unwrap();
    assert!(all == pattern(0, 4 * MIN_RING), "bytes differ");
    writer.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_asleep_on_an_empty_ring_is_woken_by_the_writer() {
    let ((_kr, mut kw), (mut wr, _ww)) = pair(MIN_RING).await;
    let waker = noop_cx();
    let mut cx = Context::from_waker(&waker);
    let mut buf = [0u8; 8];
    let mut rb = ReadBuf::new(&mut buf);
    assert!(Pin::new(&mut wr).poll_read(&mut cx, &mut rb).is_pending(), "an empty ring has nothing to read");
    let reader = tokio::spawn(async move {
        let mut got = [0u8; 5];
        wr.read_exact(&mut got).await.unwrap();
        got
    });
    // Let the reader go to sleep for real (marked asleep, waiting on the socket).
    tokio::task::yield_now().await;
    kw.write_all(b"hello").await.unwrap();
    assert_eq!(&reader.await.unwrap(), b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_gone_mid_frame_is_a_truncation_not_a_hang() {
    let ((kr, mut kw), (mut wr, mut ww)) = pair(MIN_RING).await;
    // Half a frame larger than the ring, then the keeper's end vanishes
    // (both halves dropped: its socket closes, as when a process dies).
    let payload = Bytes::from(pattern(0, 3 * MIN_RING));
    let mut frame = Vec::new();
    write_frame(&mut frame, Header::new(Body::Ping(Ping {})), Some(&payload)).await.unwrap();
    let half = frame.len() / 2;
    let writer = tokio::spawn(async move {
        kw.write_all(&frame[..half]).await.unwrap();
        drop(kw);
        drop(kr);
    });
    let pool = RecvPool::new(1);
    let e = read_frame_pooled(&mut wr, 1 << 30, &pool).await.unwrap_err();
    assert!(matches!(e, FrameError::Truncated("payload")), "{e}");
    writer.await.unwrap();
    // Writing to the vanished peer fails too, once the ring is full or at once.
    let mut failed = false;
    for _ in 0..4 {
        if ww.write_all(&pattern(0, MIN_RING)).await.is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "writes to a vanished peer must fail");
}

/// Frames as the connection's writer sends them: the payload kept alive
/// for the writer, so large ones may go by reference.
async fn send_kept(w: &mut ShmWrite, payload: &Bytes) {
    w.keep_alive(payload);
    write_frame(w, Header::new(Body::Ping(Ping {})), Some(payload)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_go_by_reference_once_the_reader_can_read_the_writer() {
    const RING: usize = 1 << 20;
    let ((_kr, mut kw), (mut wr, _ww)) = pair(RING).await;
    let small = Bytes::from(pattern(0, 100));
    let first = Bytes::from(pattern(5, RING / 2));
    let large = Bytes::from(pattern(7, 3 * RING + 13));
    let pool = RecvPool::new(1);
    // Written (it fits in the ring) before the reader has ever polled, so
    // before it has probed the writer: through the ring.
    send_kept(&mut kw, &first).await;
    assert_eq!(kw.references(), 0);
    let (small_sent, large_sent) = (small.clone(), large.clone());
    let writer = tokio::spawn(async move {
        for p in [&small_sent, &large_sent, &large_sent, &small_sent, &large_sent] {
            send_kept(&mut kw, p).await;
        }
        kw.references()
    });
    for want in [&first, &small, &large, &large] {
        let (_, got) = read_frame_pooled(&mut wr, 1 << 30, &pool).await.unwrap();
        assert!(got == want, "payload of {} bytes differs", want.len());
    }
    // Read in small pieces: a reference is copied in as many parts.
    let mut piece = vec![0u8; 1000];
    let mut all = Vec::new();
    while !all.ends_with(&large[..]) {
        let n = wr.read(&mut piece).await.unwrap();
        assert!(n > 0 && all.len() < 2 * large.len(), "stream ended early or differs");
        all.extend_from_slice(&piece[..n]);
    }
    assert!(all.windows(100).any(|w| w == &small[..]));
    assert_eq!(writer.await.unwrap(), 3, "each large payload after the probe by reference, small ones never");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_cannot_read_the_writer_gets_everything_through_the_ring() {
    let ((_kr, mut kw), (mut wr, _ww)) = pair(MIN_RING).await;
    // A pid that is not the writer's (another pid namespace, say): the probe fails.
    kw.pretend_pid(u64::from(u32::MAX >> 2));
    let large = Bytes::from(pattern(3, 5 * MIN_RING));
    let writer = tokio::spawn(async move {
        for _ in 0..3 {
            send_kept(&mut kw, &large).await;
        }
        kw.references()
    });
    let pool = RecvPool::new(1);
    for _ in 0..3 {
        let (_, got) = read_frame_pooled(&mut wr, 1 << 30, &pool).await.unwrap();
        assert!(got == pattern(3, 5 * MIN_RING), "payload differs");
    }
    assert_eq!(writer.await.unwrap(), 0, "nothing goes by reference");
}

/// Bytes whose owner says when it is dropped.
struct Watched(Vec<u8>, Arc<std::sync::atomic::AtomicBool>);
impl AsRef<[u8]> for Watched {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
impl Drop for Watched {
    fn drop(&mut self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_posted_by_reference_outlives_a_writer_dropped_before_the_copy() {
    let ((_kr, mut kw), (mut wr, _ww)) = pair(MIN_RING).await;
    // Let the reader probe the writer.
    send_kept(&mut kw, &Bytes::from_static(b"probe")).await;
    let pool = RecvPool::new(1);
    read_frame_pooled(&mut wr, 1 << 30, &pool).await.unwrap();
    let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let payload = Bytes::from_owner(Watched(pattern(1, 4 * MIN_RING), freed.clone()));
    kw.keep_alive(&payload);
    let waker = noop_cx();
    let mut cx = Context::from_waker(&waker);
    // Posted, not yet copied: the write is pending; then the writer goes.
    assert!(Pin::new(&mut kw).poll_write(&mut cx, &payload).is_pending());
    drop(kw);
    drop(payload);
    assert!(!freed.load(std::sync::atomic::Ordering::SeqCst), "freed while the reader may still copy it");
    // The reader still gets every byte.
    let mut got = vec![0u8; 4 * MIN_RING];
    wr.read_exact(&mut got).await.unwrap();
    assert!(got == pattern(1, 4 * MIN_RING), "bytes differ");
}

// ---- whole clusters ----

const ROWS: u32 = 64;
const WIDTH: usize = 8;
const CLOCKS: u64 = 3;

struct RankResult {
    values: Vec<f32>,
    socket_batches: u64,
    shm_batches: u64,
}

/// Runs CLOCKS BSP clocks (every rank adds rank + 1 to every row, clocks and
/// reads) and returns the last read and how this rank's keeper got its batches.
fn run_rank(rank: usize, world: usize, server: String, options: NetOptions) -> RankResult {
    let run = BspRun { rows: ROWS, width: WIDTH, clocks: CLOCKS };
    let options = options.with_shm_ring_bytes(MIN_RING);
    let delta = |_, _| (rank + 1) as f32;
    let (values, (socket_batches, shm_batches)) =
        bsp_rank(rank, world, server, options, &run, delta, |c| (c.keeper_socket_batches(), c.keeper_shm_batches()));
    RankResult { values, socket_batches, shm_batches }
}

/// A cluster of `world` ranks in threads, rank r with `options(r)`;
/// checks that every rank read every update exactly.
fn cluster(world: usize, options: impl Fn(usize) -> NetOptions) -> Vec<RankResult> {
    let server = crate::test_rendezvous::loopback_rendezvous(world, "");
    let threads: Vec<_> = (0..world)
        .map(|r| {
            let (server, o) = (server.clone(), options(r));
            std::thread::spawn(move || run_rank(r, world, server, o))
        })
        .collect();
    let results: Vec<RankResult> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let want = (CLOCKS as usize * world * (world + 1) / 2) as f32;
    for (r, res) in results.iter().enumerate() {
        assert!(res.values.iter().all(|v| *v == want), "rank {r} read {:?}, expected {want}", &res.values[..4]);
    }
    results
}

#[test]
fn same_host_ranks_move_their_updates_through_shared_memory_not_the_sockets() {
    let world = 3;
    // A directory of this test's own, to see that no segment stays behind.
    let dir = std::env::temp_dir().join(format!("geeps-shm-on-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (r, res) in cluster(world, |_| NetOptions::default().with_shm_dir(dir.clone())).iter().enumerate() {
        // One batch per clock from each other rank, all through shared memory.
        assert_eq!((res.socket_batches, res.shm_batches), (0, CLOCKS * (world as u64 - 1)), "rank {r}'s keeper");
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "segments left in {}", dir.display());
    std::fs::remove_dir_all(&dir).unwrap();
    // And in the default directory (/dev/shm).
    for (r, res) in cluster(2, |_| NetOptions::default()).iter().enumerate() {
        assert_eq!((res.socket_batches, res.shm_batches), (0, CLOCKS), "rank {r}'s keeper");
    }
}

#[test]
fn with_shared_memory_off_the_updates_cross_the_sockets() {
    let world = 3;
    for (r, res) in cluster(world, |_| NetOptions::default().with_shared_memory(false)).iter().enumerate() {
        assert_eq!((res.socket_batches, res.shm_batches), (CLOCKS * (world as u64 - 1), 0), "rank {r}'s keeper");
    }
    // A keeper with it off offers nothing even to workers that would take it.
    let results = cluster(2, |r| NetOptions::default().with_shared_memory(r == 0));
    assert_eq!((results[1].socket_batches, results[1].shm_batches), (CLOCKS, 0));
    assert_eq!((results[0].socket_batches, results[0].shm_batches), (CLOCKS, 0));
}

#[test]
fn a_segment_the_worker_cannot_open_falls_back_to_tcp_with_the_same_results() {
    // Each rank creates and looks for segments in a directory of its own:
    // another rank's keeper offers a segment this worker cannot open (as
    // with a private /dev/shm per container), so the connection stays on
    // TCP.
    let world = 3;
    let base = std::env::temp_dir().join(format!("geeps-shm-fallback-{}", std::process::id()));
    let dirs: Vec<_> = (0..world).map(|r| base.join(r.to_string())).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
    }
    let results = cluster(world, |r| NetOptions::default().with_shm_dir(dirs[r].clone()));
    for (r, res) in results.iter().enumerate() {
        assert_eq!((res.socket_batches, res.shm_batches), (CLOCKS * (world as u64 - 1), 0), "rank {r}'s keeper");
    }
    // Nothing left behind: every offered segment was unlinked.
    for d in &dirs {
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "{} keeps files", d.display());
    }
    // A keeper that cannot create a segment at all offers none.
    let results = cluster(2, |_| NetOptions::default().with_shm_dir(base.join("missing")));
    assert!(results.iter().all(|r| (r.socket_batches, r.shm_batches) == (CLOCKS, 0)));
    std::fs::remove_dir_all(&base).unwrap();
}

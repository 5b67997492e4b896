//! Streams as real asynchronous queues: each stream is served by its own
//! thread, which sleeps a random, seeded delay before every operation (so
//! work on two streams with no event between them really races), runs the
//! operations in order, and publishes how far it got. The legacy default
//! stream and blocking streams wait for each other as the driver's legacy
//! semantics require; non-blocking streams wait for nothing implicitly. A
//! failed operation sets its context's sticky error; later operations of a
//! faulted context are skipped. Must never run an operation on the caller's
//! thread, nor out of order.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::config::config;
use crate::context::{self, Context};
use crate::handles::{Kind, Registry};
use crate::ops::Op;
use crate::result::{Res, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN};

/// `CU_STREAM_LEGACY`, the legacy default stream by name.
pub const CU_STREAM_LEGACY: u64 = 0x1;
/// `CU_STREAM_PER_THREAD`, the calling thread's default stream.
pub const CU_STREAM_PER_THREAD: u64 = 0x2;
/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: u32 = 0x1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// The NULL / legacy default stream: waits for, and is waited for by, blocking streams.
    Legacy,
    /// Created with flags 0 (and the per-thread default stream).
    Blocking,
    /// Created with `CU_STREAM_NON_BLOCKING`.
    NonBlocking,
}

/// How far a stream's queue got; what events and waits look at.
pub struct Progress {
    pub context: Arc<Context>,
    counts: Mutex<(u64, u64)>,
    changed: Condvar,
}

impl Progress {
    /// The sequence number of the last operation enqueued.
    pub fn mark(&self) -> u64 {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Whether operation `seq` and all before it have completed.
    pub fn done(&self, seq: u64) -> bool {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).1 >= seq
    }

    /// Blocks until operation `seq` has completed.
    pub fn wait_for(&self, seq: u64) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        while counts.1 < seq {
            counts = self.changed.wait(counts).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn complete(&self, seq: u64) {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).1 = seq;
        self.changed.notify_all();
    }
}

struct Job {
    seq: u64,
    op: Op,
}

pub struct Stream {
    pub kind: StreamKind,
    pub progress: Arc<Progress>,
    tx: Mutex<Option<Sender<Job>>>,
}

/// Streams created by `cuStreamCreate` (and per-thread default streams).
pub static STREAMS: Registry<Arc<Stream>> = Registry::new(Kind::Stream);

static SERIAL: AtomicU64 = AtomicU64::new(0);

impl Stream {
    /// A new stream of `context` with its serving thread.
    pub fn spawn(context: &Arc<Context>, kind: StreamKind) -> Arc<Stream> {
        let (tx, rx) = channel::<Job>();
        let progress =
            Arc::new(Progress { context: context.clone(), counts: Mutex::new((0, 0)), changed: Condvar::new() });
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let served = progress.clone();
        let spawned = std::thread::Builder::new().name(format!("cuda-emu-stream-{serial}")).spawn(move || {
            let mut delay = Delay::new(serial);
            for job in rx {
                delay.sleep();
                if served.context.sticky().is_ok() {
                    let what = job.op.describe();
                    match catch_unwind(AssertUnwindSafe(|| job.op.run())) {
                        Ok(Ok(())) => {}
                        Ok(Err((code, why))) => served.context.fail(code, &format!("{what} failed: {why}")),
                        Err(_) => served.context.fail(CUDA_ERROR_UNKNOWN, &format!("{what} panicked in the emulator")),
                    }
                }
                served.complete(job.seq);
            }
        });
        let tx = match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                crate::log::fault(&format!("could not start a stream thread ({e}); the stream refuses work"));
                None
            }
        };
        Arc::new(Stream { kind, progress, tx: Mutex::new(tx) })
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.progress.context
    }

    /// Appends `op`; returns its sequence number.
    fn enqueue(&self, op: Op) -> Res<u64> {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = tx.as_ref().ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let mut counts = self.progress.counts.lock().unwrap_or_else(|p| p.into_inner());
        let seq = counts.0 + 1;
        tx.send(Job { seq, op }).map_err(|_| CUDA_ERROR_INVALID_HANDLE)?;
        counts.0 = seq;
        Ok(seq)
    }

    /// Stops taking work; the thread finishes what is queued, then exits.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Enqueues `op` on `stream` behind the implicit waits of the legacy
/// semantics; returns its sequence number. Refused on a faulted context.
pub fn submit(stream: &Stream, op: Op) -> Res<u64> {
    let ctx = stream.context();
    ctx.sticky()?;
    match stream.kind {
        StreamKind::NonBlocking => {}
        StreamKind::Legacy => {
            let blocking = STREAMS.collect(|s| s.kind == StreamKind::Blocking && s.context().handle == ctx.handle);
            for b in blocking {
                wait_behind(stream, &b.progress)?;
            }
        }
        StreamKind::Blocking => {
            if let Some(legacy) = ctx.existing_legacy_stream() {
                wait_behind(stream, &legacy.progress)?;
            }
        }
    }
    stream.enqueue(op)
}

/// Makes `stream` wait for everything `other` has enqueued so far.
fn wait_behind(stream: &Stream, other: &Arc<Progress>) -> Res<()> {
    let mark = other.mark();
    if !other.done(mark) {
        stream.enqueue(Op::Wait { progress: other.clone(), seq: mark })?;
    }
    Ok(())
}

thread_local! {
    static PER_THREAD: RefCell<Vec<Arc<Stream>>> = const { RefCell::new(Vec::new()) };
}

/// The stream a `CUstream` value names: 0 and `CU_STREAM_LEGACY` the current
/// context's legacy stream, `CU_STREAM_PER_THREAD` this thread's default
/// stream, anything else a live stream handle.
pub fn resolve(handle: u64) -> Res<Arc<Stream>> {
    match handle {
        0 | CU_STREAM_LEGACY => context::current()?.legacy_stream(),
        CU_STREAM_PER_THREAD => {
            let ctx = context::current()?;
            PER_THREAD.with(|streams| {
                let mut streams = streams.borrow_mut();
                streams.retain(|s| !s.context().is_destroyed());
                if let Some(s) = streams.iter().find(|s| s.context().handle == ctx.handle) {
                    return Ok(s.clone());
                }
                let s = Stream::spawn(&ctx, StreamKind::Blocking);
                STREAMS.insert(s.clone()).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
                streams.push(s.clone());
                Ok(s)
            })
        }
        h => {
            context::require_init()?;
            STREAMS.get(h).filter(|s| !s.context().is_destroyed()).ok_or(CUDA_ERROR_INVALID_HANDLE)
        }
    }
}

/// Every stream of the context `handle` (the legacy one included, if made).
pub fn context_streams(ctx: &Arc<Context>) -> Vec<Arc<Stream>> {
    let mut all = STREAMS.collect(|s| s.context().handle == ctx.handle);
    all.extend(ctx.existing_legacy_stream());
    all
}

/// Closes and unregisters every stream of the context `handle`.
pub fn destroy_context_streams(handle: u64) {
    for s in STREAMS.remove_where(|s| s.context().handle == handle) {
        s.close();
    }
}

/// The per-operation delay of one stream: uniform in 0..=max µs, from a
/// splitmix64 sequence seeded by the configured seed and the stream's serial.
struct Delay {
    state: u64,
    max_us: u64,
}

impl Delay {
    fn new(serial: u64) -> Delay {
        Delay { state: config().seed ^ serial.wrapping_mul(0x9E37_79B9_7F4A_7C15), max_us: config().delay_us }
    }

    fn sleep(&mut self) {
        if self.max_us == 0 {
            return;
        }
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let us = z % (self.max_us + 1);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

//! Streams as real asynchronous queues: each stream is served by its own
//! thread, which sleeps a random, seeded delay before every operation (so
//! work on two streams with no event between them really races), runs the
//! operations in order, and publishes how far it got (`progress`). A failed
//! operation sets its context's sticky error; later operations of a
//! faulted context are skipped. Before running, an operation is checked by
//! the race detector (`racecheck`); a race fails the context as a fault
//! does. In lazy mode (`GEEPS_CUDA_EMU_LAZY=1`) an operation runs only once
//! something waits for it. Which streams exist, and the implicit waits
//! between them, are `stream_table`'s. Must never run an operation on the
//! caller's thread, nor out of order.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::config;
use crate::context::Context;
use crate::ops::Op;
use crate::progress::Progress;
use crate::racecheck::{self, Stamp};
use crate::result::{Res, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_UNKNOWN};

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

struct Job {
    seq: u64,
    op: Op,
    /// Its race-detector stamp (None with the detector off).
    stamp: Option<Stamp>,
}

pub struct Stream {
    pub kind: StreamKind,
    pub progress: Arc<Progress>,
    tx: Mutex<Option<Sender<Job>>>,
}

static SERIAL: AtomicU64 = AtomicU64::new(0);

impl Stream {
    /// A new stream of `context` with its serving thread.
    pub fn spawn(context: &Arc<Context>, kind: StreamKind) -> Arc<Stream> {
        let (tx, rx) = channel::<Job>();
        let progress = Arc::new(Progress::new(context.clone(), racecheck::new_lane()));
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let served = progress.clone();
        let spawned = std::thread::Builder::new().name(format!("cuda-emu-stream-{serial}")).spawn(move || {
            let mut delay = Delay::new(serial);
            for job in rx {
                if config().lazy {
                    served.await_demand(job.seq);
                }
                delay.sleep();
                let raced = job.stamp.as_ref().and_then(|stamp| racecheck::check(&job.op, stamp).err());
                if let Some(why) = raced {
                    served.context.fail(CUDA_ERROR_LAUNCH_FAILED, &why);
                } else if served.context.sticky().is_ok() {
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
    pub fn enqueue(&self, op: Op) -> Res<u64> {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let tx = tx.as_ref().ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        // Stamped under the queue's lock, so stamps follow queue order.
        self.progress.enqueue(|seq| {
            let stamp = racecheck::stamp(self.progress.lane, &op);
            tx.send(Job { seq, op, stamp }).map_err(|_| CUDA_ERROR_INVALID_HANDLE)
        })
    }

    /// Stops taking work; the thread finishes what is queued, then exits.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        // A lazy stream drains what is queued rather than sleeping forever.
        self.progress.demand(u64::MAX);
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

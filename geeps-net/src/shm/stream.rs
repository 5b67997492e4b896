//! A connection's two halves over a shared-memory segment: `ShmRead`
//! consumes one ring and `ShmWrite` produces into the other, as
//! `AsyncRead`/`AsyncWrite`, so the frame code works unchanged. The TCP
//! socket the connection was made on stays open as the doorbell and the
//! liveness signal. Waking is an eventcount: a reader that finds its ring
//! empty stores its waker, marks itself asleep in the segment, re-checks,
//! and only then waits; a writer that publishes bytes and finds the reader
//! marked asleep clears the mark and sends one byte on the socket (the same
//! with the roles swapped for a writer parked on a full ring). A task per
//! connection reads doorbell bytes and wakes both halves; when the socket
//! closes (the peer process ended or died) both halves see the peer gone:
//! the reader drains what is left and then reports end of stream (mid-frame,
//! a truncation error), the writer fails. Never panics; never blocks a thread.
//!
//! A large write goes by reference once the reader has shown it can copy
//! from this process (see `shm_ring.rs`): the write is pending until the
//! reader has copied the bytes, one copy instead of two; the writer that
//! waits is woken as for a full ring.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

use crate::shm::ring::{Consumer, Producer, Ring};
use crate::shm::segment::Segment;

/// Who is waiting on this end, and whether the peer is gone.
#[derive(Default)]
struct Wakes {
    dead: AtomicBool,
    read: Mutex<Option<Waker>>,
    write: Mutex<Option<Waker>>,
}

impl Wakes {
    fn wake(&self) {
        for slot in [&self.read, &self.write] {
            if let Some(w) = slot.lock().take() {
                w.wake();
            }
        }
    }

    fn dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }
}

/// What both halves of one end share: the socket's write half (to ring the
/// peer), the wakers, and the doorbell task's stop signal (dropped with the
/// last half, which ends the task and closes the socket).
struct Link {
    bell: OwnedWriteHalf,
    wakes: Arc<Wakes>,
    _stop: oneshot::Sender<()>,
}

impl Link {
    /// One byte to the peer: "look at the rings". A full socket buffer
    /// already holds bytes the peer has not read, so a refused byte is not lost news.
    fn ring(&self) {
        let _ = self.bell.try_write(&[1]);
    }
}

/// Reads doorbell bytes until the socket closes (then marks the peer dead)
/// or this end drops its halves.
async fn doorbell(mut rd: OwnedReadHalf, wakes: Arc<Wakes>, mut stop: oneshot::Receiver<()>) {
    let mut buf = [0u8; 256];
    loop {
        tokio::select! {
            r = rd.read(&mut buf) => match r {
                Ok(n) if n > 0 => wakes.wake(),
                _ => break,
            },
            _ = &mut stop => return,
        }
    }
    wakes.dead.store(true, Ordering::SeqCst);
    wakes.wake();
}

/// The reading half over shared memory.
pub(crate) struct ShmRead {
    link: Arc<Link>,
    cons: Consumer,
}

/// The writing half over shared memory.
pub(crate) struct ShmWrite {
    link: Arc<Link>,
    prod: Producer,
    /// Number of the last reference posted.
    posted: u64,
    /// The reference the reader is copying: its number, address and length.
    pending: Option<(u64, u64, usize)>,
    /// The payload being written, whose bytes may go by reference: held
    /// until the reader has copied them (leaked if this half drops first,
    /// so a reader still copying never reads freed memory).
    keep: Option<bytes::Bytes>,
}

/// Writes at least this large go by reference where they can: below it the
/// ring's second copy costs less than the wait for the reader.
const BY_REFERENCE_FROM: usize = 256 << 10;

/// The halves of one end of a connection whose socket halves are `rd` and
/// `wr`: the keeper's end (`keeper`) writes ring 0 and reads ring 1, the
/// worker's the other way round. Must run inside a tokio runtime.
pub(crate) fn sides(seg: Arc<Segment>, keeper: bool, rd: OwnedReadHalf, wr: OwnedWriteHalf) -> (ShmRead, ShmWrite) {
    let (out, inn) = if keeper { (0, 1) } else { (1, 0) };
    let wakes = Arc::new(Wakes::default());
    let (stop_tx, stop_rx) = oneshot::channel();
    tokio::spawn(doorbell(rd, wakes.clone(), stop_rx));
    let link = Arc::new(Link { bell: wr, wakes, _stop: stop_tx });
    let read = ShmRead { link: link.clone(), cons: Consumer::new(Ring::new(seg.clone(), inn)) };
    let write = ShmWrite { link, prod: Producer::new(Ring::new(seg, out)), posted: 0, pending: None, keep: None };
    (read, write)
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the peer closed its connection (shared memory)")
}

impl AsyncRead for ShmRead {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let mut asleep = false;
        me.cons.probe_producer();
        loop {
            // SAFETY: only bytes are written into the unfilled part (never
            // uninitialised memory), and only the ones copied are then
            // marked initialised.
            let dst = unsafe { buf.unfilled_mut() };
            let (ptr, len) = (dst.as_mut_ptr().cast::<u8>(), dst.len());
            // SAFETY: `ptr` is valid for writes of `len` bytes.
            let mut read = unsafe { me.cons.read_raw(ptr, len) }.map(|n| (n, n > 0));
            if let Ok((0, _)) = read {
                // The ring is drained: a posted reference's bytes come next.
                // SAFETY: as above.
                read = unsafe { me.cons.read_reference(ptr, len) };
            }
            let (n, wake_writer) = match read {
                Ok(r) => r,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if n > 0 {
                if asleep {
                    me.cons.ring.set_reader_asleep(false);
                }
                // SAFETY: `n` bytes were just copied into the unfilled part.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                if wake_writer && me.cons.ring.take_writer_asleep() {
                    me.link.ring();
                }
                return Poll::Ready(Ok(()));
            }
            // Empty: the end of the stream once the writer closed or its
            // process is gone (with everything it wrote read).
            if me.cons.ring.closed() || me.link.wakes.dead() {
                match me.cons.available() {
                    Ok(0) => return Poll::Ready(Ok(())),
                    Ok(_) => continue,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            if asleep {
                return Poll::Pending;
            }
            *me.link.wakes.read.lock() = Some(cx.waker().clone());
            me.cons.ring.set_reader_asleep(true);
            asleep = true;
            // Loop once more: bytes, a close or the peer's death that came
            // before the mark are seen now; any after it rings the doorbell.
        }
    }
}

impl ShmWrite {
    fn poll_put(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let by_reference = self.prod.by_reference();
        let kept = self.keep.as_ref().map(|k| k.as_ptr_range());
        // Only bytes of the kept payload: their memory outlives the write.
        let large = |b: &IoSlice<'_>| {
            let range = b.as_ptr_range();
            by_reference
                && b.len() >= BY_REFERENCE_FROM
                && kept.as_ref().is_some_and(|k| k.start <= range.start && range.end <= k.end)
        };
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()).filter(|b| large(b)) {
            return self.poll_by_reference(cx, first);
        }
        if self.pending.is_some() {
            return Poll::Ready(Err(abandoned()));
        }
        // Small slices through the ring, up to a large one (written next call).
        let bufs = &bufs[..bufs.iter().position(large).unwrap_or(bufs.len())];
        let mut asleep = false;
        loop {
            if self.link.wakes.dead() {
                return Poll::Ready(Err(gone()));
            }
            let n = match self.prod.write(bufs) {
                Ok(n) => n,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if n > 0 || bufs.iter().all(|b| b.is_empty()) {
                if asleep {
                    self.prod.ring.set_writer_asleep(false);
                }
                if self.prod.ring.take_reader_asleep() {
                    self.link.ring();
                }
                return Poll::Ready(Ok(n));
            }
            if asleep {
                return Poll::Pending;
            }
            *self.link.wakes.write.lock() = Some(cx.waker().clone());
            self.prod.ring.set_writer_asleep(true);
            asleep = true;
        }
    }
}

impl ShmWrite {
    /// Writes `buf` by reference: posts it, then is pending until the
    /// reader has copied it (`buf` must be passed again until then, as
    /// `AsyncWrite` callers do).
    fn poll_by_reference(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let (addr, len) = (buf.as_ptr() as u64, buf.len());
        let seq = match self.pending {
            Some((seq, a, l)) if (a, l) == (addr, len) => seq,
            Some(_) => return Poll::Ready(Err(abandoned())),
            None => {
                self.posted += 1;
                self.prod.post_reference(self.posted, addr, len);
                self.pending = Some((self.posted, addr, len));
                if self.prod.ring.take_reader_asleep() {
                    self.link.ring();
                }
                self.posted
            }
        };
        let mut asleep = false;
        loop {
            if self.prod.ring.acknowledged() >= seq {
                self.pending = None;
                self.keep = None;
                if asleep {
                    self.prod.ring.set_writer_asleep(false);
                }
                return Poll::Ready(Ok(len));
            }
            if self.link.wakes.dead() {
                return Poll::Ready(Err(gone()));
            }
            if asleep {
                return Poll::Pending;
            }
            *self.link.wakes.write.lock() = Some(cx.waker().clone());
            self.prod.ring.set_writer_asleep(true);
            asleep = true;
        }
    }
}

impl ShmWrite {
    /// How many writes went by reference.
    #[cfg(test)]
    pub(crate) fn references(&self) -> u64 {
        self.posted
    }

    /// Publishes `pid` as this writer's process, as a peer in another pid
    /// namespace would appear (the reader's probe then fails).
    #[cfg(test)]
    pub(crate) fn pretend_pid(&self, pid: u64) {
        self.prod.pretend_pid(pid);
    }

    /// Keeps `payload` for the writes that follow (see `keep`).
    pub(crate) fn keep_alive(&mut self, payload: &bytes::Bytes) {
        if self.pending.is_none() {
            self.keep = Some(payload.clone());
        }
    }
}

impl Drop for ShmWrite {
    fn drop(&mut self) {
        if self.pending.is_some_and(|(seq, _, _)| self.prod.ring.acknowledged() < seq) {
            // The reader may still be copying from it.
            std::mem::forget(self.keep.take());
        }
    }
}

fn abandoned() -> io::Error {
    io::Error::other("a write by reference was abandoned before the reader copied it; the connection cannot go on")
}

impl AsyncWrite for ShmWrite {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_put(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_put(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Bytes are visible to the reader once written.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.prod.ring.close();
        if me.prod.ring.take_reader_asleep() {
            me.link.ring();
        }
        Poll::Ready(Ok(()))
    }
}

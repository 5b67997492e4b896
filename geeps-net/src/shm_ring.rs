//! One single-producer single-consumer byte ring inside a shared-memory
//! segment. Positions are monotonic `u64` byte counts (the producer's tail
//! and the consumer's head, each on a cache line of its own); the bytes
//! between them are the consumer's to read, the rest the producer's to
//! write. Flags on their own lines say that the consumer is asleep on an
//! empty ring, that the producer is asleep on a full one, and that the
//! producer closed. Each end keeps its own position and only reads the
//! other's, so a peer that scribbles on the segment is seen as corrupt (an
//! error), never as a reason to read or write outside the ring. It never
//! blocks and never touches a socket: waking is the stream's job.

use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::shm_segment::Segment;

const TAIL: usize = 0;
const HEAD: usize = 128;
const READER_ASLEEP: usize = 256;
const WRITER_ASLEEP: usize = 384;
const CLOSED: usize = 512;

/// Ring `index` of a segment: where its words and data are.
#[derive(Clone)]
pub(crate) struct Ring {
    seg: Arc<Segment>,
    ctrl: usize,
    data: usize,
    cap: u64,
}

fn corrupt(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("shared-memory ring corrupt: {what}"))
}

impl Ring {
    /// Ring `index` (0: keeper to worker, 1: worker to keeper) of `seg`.
    pub(crate) fn new(seg: Arc<Segment>, index: usize) -> Ring {
        let (ctrl, data) = seg.ring_offsets(index);
        let cap = seg.ring_bytes() as u64;
        Ring { seg, ctrl, data, cap }
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        self.seg.word(self.ctrl + at)
    }

    /// Marks the consumer asleep (`true`) or awake; returns nothing, the
    /// caller re-checks the ring after marking itself asleep.
    pub(crate) fn set_reader_asleep(&self, asleep: bool) {
        self.word(READER_ASLEEP).store(asleep as u64, Ordering::SeqCst);
    }

    /// Clears the consumer's asleep flag; whether it was set (then the
    /// producer must ring the doorbell).
    pub(crate) fn take_reader_asleep(&self) -> bool {
        self.word(READER_ASLEEP).swap(0, Ordering::SeqCst) != 0
    }

    /// Marks the producer asleep on a full ring, or awake.
    pub(crate) fn set_writer_asleep(&self, asleep: bool) {
        self.word(WRITER_ASLEEP).store(asleep as u64, Ordering::SeqCst);
    }

    /// Clears the producer's asleep flag; whether it was set.
    pub(crate) fn take_writer_asleep(&self) -> bool {
        self.word(WRITER_ASLEEP).swap(0, Ordering::SeqCst) != 0
    }

    /// Whether the producer closed its end.
    pub(crate) fn closed(&self) -> bool {
        self.word(CLOSED).load(Ordering::SeqCst) != 0
    }

    /// The producer closes its end: no more bytes will come.
    pub(crate) fn close(&self) {
        self.word(CLOSED).store(1, Ordering::SeqCst);
    }
}

/// The writing end of a ring.
pub(crate) struct Producer {
    pub(crate) ring: Ring,
    tail: u64,
}

impl Producer {
    pub(crate) fn new(ring: Ring) -> Self {
        Producer { ring, tail: 0 }
    }

    /// Bytes free for writing now.
    pub(crate) fn free(&self) -> io::Result<u64> {
        let head = self.ring.word(HEAD).load(Ordering::SeqCst);
        let used = self.tail.wrapping_sub(head);
        if used > self.ring.cap {
            return Err(corrupt(format!("reader at {head}, writer at {}", self.tail)));
        }
        Ok(self.ring.cap - used)
    }

    /// Copies as much of `bufs` as fits; the number of bytes written (0 when full).
    pub(crate) fn write(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut room = self.free()?;
        let mut written = 0usize;
        for b in bufs {
            if room == 0 {
                break;
            }
            let n = (b.len() as u64).min(room) as usize;
            self.copy_in(&b[..n]);
            written += n;
            room -= n as u64;
        }
        if written > 0 {
            self.ring.word(TAIL).store(self.tail, Ordering::SeqCst);
        }
        Ok(written)
    }

    /// Copies `src` (which fits) at the local tail, wrapping around.
    fn copy_in(&mut self, src: &[u8]) {
        let at = (self.tail % self.ring.cap) as usize;
        let first = src.len().min(self.ring.cap as usize - at);
        // SAFETY: both pieces are inside the ring's data (at + first <= cap,
        // the rest from 0), which between tail and head + cap belongs to the
        // producer alone; `src` is ordinary memory.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ring.seg.ptr(self.ring.data + at, first), first);
            let rest = src.len() - first;
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.ring.seg.ptr(self.ring.data, rest), rest);
        }
        self.tail = self.tail.wrapping_add(src.len() as u64);
    }
}

/// The reading end of a ring.
pub(crate) struct Consumer {
    pub(crate) ring: Ring,
    head: u64,
}

impl Consumer {
    pub(crate) fn new(ring: Ring) -> Self {
        Consumer { ring, head: 0 }
    }

    /// Bytes ready for reading now.
    pub(crate) fn available(&self) -> io::Result<u64> {
        let tail = self.ring.word(TAIL).load(Ordering::SeqCst);
        let used = tail.wrapping_sub(self.head);
        if used > self.ring.cap {
            return Err(corrupt(format!("writer at {tail}, reader at {}", self.head)));
        }
        Ok(used)
    }

    /// Copies up to `len` ready bytes to `dst`; the number copied (0 when empty).
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes.
    pub(crate) unsafe fn read_raw(&mut self, dst: *mut u8, len: usize) -> io::Result<usize> {
        let n = self.available()?.min(len as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        let at = (self.head % self.ring.cap) as usize;
        let first = n.min(self.ring.cap as usize - at);
        // SAFETY: both pieces are inside the ring's data and between head and
        // tail (the consumer's alone); `dst` is valid for `len >= n` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.seg.ptr(self.ring.data + at, first), dst, first);
            std::ptr::copy_nonoverlapping(self.ring.seg.ptr(self.ring.data, n - first), dst.add(first), n - first);
        }
        self.head = self.head.wrapping_add(n as u64);
        self.ring.word(HEAD).store(self.head, Ordering::SeqCst);
        Ok(n)
    }

    /// Copies ready bytes into `dst`; the number copied.
    #[cfg(test)]
    pub(crate) fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `dst` is a valid slice of its length.
        unsafe { self.read_raw(dst.as_mut_ptr(), dst.len()) }
    }
}

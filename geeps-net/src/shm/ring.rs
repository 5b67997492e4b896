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
//!
//! Large writes may also go by reference (one copy where the ring takes
//! two): the producer posts the address and length of bytes in its own
//! memory, to be read at the stream position it has reached, and writes
//! nothing more until the consumer, which copies them straight from the
//! producer's process (`process_vm_readv`) into its destination, acknowledges
//! them. Only once the consumer has proved it can read the producer's memory
//! (a probe value at a published address, read back) does the producer post
//! references; where it cannot (another user, another pid namespace, a
//! kernel that forbids it) everything goes through the ring as before.

use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::shm::segment::{random_u64, Segment};

const TAIL: usize = 0;
const HEAD: usize = 128;
const READER_ASLEEP: usize = 256;
const WRITER_ASLEEP: usize = 384;
const CLOSED: usize = 512;
/// The latest reference posted (its number; 0: none yet), where in the
/// stream its bytes belong, their address in the producer and their length.
const REF_SEQ: usize = 640;
const REF_AT: usize = 648;
const REF_ADDR: usize = 656;
const REF_LEN: usize = 664;
/// The latest reference the consumer has copied in full.
const REF_ACK: usize = 768;
/// The producer's pid and a value of its memory at an address, for the probe.
const PRODUCER_PID: usize = 896;
const PROBE_ADDR: usize = 904;
const PROBE_VALUE: usize = 912;
/// Set by the consumer once it has read the probe value from the producer.
const CAN_READ_PRODUCER: usize = 1024;

/// A value of this process's memory that consumers read to prove they can.
fn probe() -> &'static AtomicU64 {
    static PROBE: OnceLock<AtomicU64> = OnceLock::new();
    PROBE.get_or_init(|| AtomicU64::new(random_u64() | 1))
}

/// Copies `len` bytes at `addr` in process `pid` to `dst`.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes.
unsafe fn read_process(pid: u64, addr: u64, dst: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec { iov_base: dst.wrapping_add(done).cast(), iov_len: len - done };
        let remote =
            libc::iovec { iov_base: (addr as usize).wrapping_add(done) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: `local` lies in `dst` (valid for `len` bytes); the kernel
        // checks `remote` against the other process's mappings.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("copying {len} bytes from the peer process {pid} (shared memory by reference): {e}"),
            ));
        }
        done += n as usize;
    }
    Ok(())
}

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

    /// The latest reference the consumer has copied in full.
    pub(crate) fn acknowledged(&self) -> u64 {
        self.word(REF_ACK).load(Ordering::SeqCst)
    }
}

/// The writing end of a ring.
pub(crate) struct Producer {
    pub(crate) ring: Ring,
    tail: u64,
}

impl Producer {
    /// The producer of `ring`; publishes what the consumer needs to probe
    /// whether it can read this process's memory.
    pub(crate) fn new(ring: Ring) -> Self {
        let probe = probe();
        ring.word(PROBE_VALUE).store(probe.load(Ordering::Relaxed), Ordering::SeqCst);
        ring.word(PROBE_ADDR).store(probe as *const AtomicU64 as u64, Ordering::SeqCst);
        ring.word(PRODUCER_PID).store(u64::from(std::process::id()), Ordering::SeqCst);
        Producer { ring, tail: 0 }
    }

    #[cfg(test)]
    pub(crate) fn pretend_pid(&self, pid: u64) {
        self.ring.word(PRODUCER_PID).store(pid, Ordering::SeqCst);
    }

    /// Whether the consumer has shown it can copy from this process.
    pub(crate) fn by_reference(&self) -> bool {
        self.ring.word(CAN_READ_PRODUCER).load(Ordering::SeqCst) == 1
    }

    /// Posts `len` bytes at `addr` (which must stay as they are until
    /// `seq` is acknowledged) as the next bytes of the stream. Ring
    /// positions count ring bytes only: the reference sits at the tail, and
    /// nothing is written after it until it is acknowledged.
    pub(crate) fn post_reference(&mut self, seq: u64, addr: u64, len: usize) {
        self.ring.word(REF_AT).store(self.tail, Ordering::SeqCst);
        self.ring.word(REF_ADDR).store(addr, Ordering::SeqCst);
        self.ring.word(REF_LEN).store(len as u64, Ordering::SeqCst);
        self.ring.word(REF_SEQ).store(seq, Ordering::SeqCst);
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
    /// The producer's pid once the probe read its memory.
    producer: Option<u64>,
    /// The latest reference copied in full, and how far into the current one.
    acked: u64,
    into_reference: u64,
}

impl Consumer {
    pub(crate) fn new(ring: Ring) -> Self {
        Consumer { ring, head: 0, producer: None, acked: 0, into_reference: 0 }
    }

    /// Reads the producer's probe value from its process; on success tells
    /// the producer it may post references. Tried until the producer has
    /// published its probe; a failure is final (everything then goes
    /// through the ring).
    pub(crate) fn probe_producer(&mut self) {
        if self.producer.is_some() || self.ring.word(CAN_READ_PRODUCER).load(Ordering::SeqCst) != 0 {
            return;
        }
        let pid = self.ring.word(PRODUCER_PID).load(Ordering::SeqCst);
        if pid == 0 {
            return;
        }
        let (addr, want) =
            (self.ring.word(PROBE_ADDR).load(Ordering::SeqCst), self.ring.word(PROBE_VALUE).load(Ordering::SeqCst));
        let mut got = 0u64;
        // SAFETY: `got` is 8 writable bytes.
        let read = unsafe { read_process(pid, addr, (&mut got as *mut u64).cast(), 8) };
        let ok = read.is_ok() && got == want && want != 0;
        self.ring.word(CAN_READ_PRODUCER).store(if ok { 1 } else { 2 }, Ordering::SeqCst);
        if ok {
            self.producer = Some(pid);
        } else {
            tracing::debug!(pid, "shared memory: cannot read the peer's memory; frames go through the ring");
        }
    }

    /// The reference whose bytes come next in the stream, if one is posted:
    /// its number, address and length.
    fn next_reference(&self) -> io::Result<Option<(u64, u64, u64)>> {
        let seq = self.ring.word(REF_SEQ).load(Ordering::SeqCst);
        if seq <= self.acked || self.ring.word(REF_AT).load(Ordering::SeqCst) != self.head {
            return Ok(None);
        }
        if self.producer.is_none() {
            return Err(corrupt(format!("reference {seq} posted before the probe allowed it")));
        }
        let (addr, len) =
            (self.ring.word(REF_ADDR).load(Ordering::SeqCst), self.ring.word(REF_LEN).load(Ordering::SeqCst));
        Ok(Some((seq, addr, len)))
    }

    /// Copies up to `len` bytes of the posted reference whose turn it is (the
    /// ring holds nothing before it) to `dst`, from the producer's memory;
    /// the number copied (0: no reference). Acknowledges it once copied in
    /// full: then whether the producer must be woken.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes.
    pub(crate) unsafe fn read_reference(&mut self, dst: *mut u8, len: usize) -> io::Result<(usize, bool)> {
        let Some((seq, addr, total)) = self.next_reference()? else { return Ok((0, false)) };
        let Some(pid) = self.producer else { return Ok((0, false)) };
        let left = total
            .checked_sub(self.into_reference)
            .filter(|l| *l > 0)
            .ok_or_else(|| corrupt(format!("reference {seq} of {total} bytes, {} read", self.into_reference)))?;
        let n = left.min(len as u64) as usize;
        // SAFETY: `dst` is valid for `len >= n` bytes.
        unsafe { read_process(pid, addr.wrapping_add(self.into_reference), dst, n)? };
        self.into_reference += n as u64;
        if self.into_reference < total {
            return Ok((n, false));
        }
        self.into_reference = 0;
        self.acked = seq;
        self.ring.word(REF_ACK).store(seq, Ordering::SeqCst);
        Ok((n, true))
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

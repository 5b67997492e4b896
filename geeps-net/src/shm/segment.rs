//! A shared-memory segment for one worker↔keeper connection on one host:
//! a header page (magic, ring size, nonce) and two rings, each a control
//! page and its data. The keeper creates the file (O_EXCL, mode 0600, a
//! random name) in the shared-memory directory and maps it; the worker
//! opens it by name in its own directory (never a path a peer gave), checks
//! owner, size and magic, and maps it; the file is unlinked as soon as both
//! ends have it mapped. This module owns the mapping and this host's
//! identity; it never reads or writes ring data and never panics on a
//! malformed file (an error says what is wrong).

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Size of the header page and of each ring's control page.
pub(crate) const PAGE: usize = 4096;
const MAGIC: u64 = 0x6765_6570_735f_7368; // "geeps_sh"
const MAGIC_AT: usize = 0;
const RING_BYTES_AT: usize = 8;
const NONCE_AT: usize = 16;
/// Smallest and largest ring accepted (the size is rounded up to pages).
pub(crate) const MIN_RING: usize = 64 << 10;
const MAX_RING: usize = 1 << 30;

/// A mapped segment; unmapped on drop.
#[derive(Debug)]
pub(crate) struct Segment {
    base: *mut u8,
    len: usize,
    ring_bytes: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it goes
// through atomics (control words) or raw copies whose ownership the rings'
// positions hand over (data), never through references to the data.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; nothing refers to
        // the mapping once the segment (held by Arc in the rings) drops.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// The segment's total length for rings of `ring_bytes`.
fn layout_len(ring_bytes: usize) -> usize {
    PAGE + 2 * (PAGE + ring_bytes)
}

/// `bytes` rounded up to whole pages, within the accepted range.
pub(crate) fn ring_size(bytes: usize) -> usize {
    bytes.clamp(MIN_RING, MAX_RING).div_ceil(PAGE) * PAGE
}

/// A random 64-bit value (std's per-process random hash keys, the clock and the pid).
pub(crate) fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    h.write_u128(now.as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// This host's identity: its boot id and host name; empty when the boot id
/// cannot be read (shared memory is then never offered nor asked for).
pub(crate) fn host_identity() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let boot = read("/proc/sys/kernel/random/boot_id");
    if boot.is_empty() {
        return String::new();
    }
    format!("{boot}/{}", read("/proc/sys/kernel/hostname"))
}

/// Whether `name` is a segment name this module could have made (no
/// directory parts, nothing a peer could use to reach another file).
fn valid_name(name: &str) -> bool {
    name.starts_with("geeps-") && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A created segment's file; unlinked on drop (if not already).
pub(crate) struct Created {
    pub(crate) name: String,
    path: PathBuf,
}

impl Created {
    /// Removes the file now; the mappings stay.
    pub(crate) fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        self.unlink();
    }
}

impl Segment {
    /// Creates and maps a fresh segment with rings of `ring_bytes` (rounded
    /// to pages) in `dir`.
    pub(crate) fn create(dir: &Path, ring_bytes: usize) -> io::Result<(Segment, Created)> {
        let ring_bytes = ring_size(ring_bytes);
        let len = layout_len(ring_bytes);
        let mut tries = 0;
        let (file, name, path) = loop {
            let name = format!("geeps-{}-{:016x}", std::process::id(), random_u64());
            let path = dir.join(&name);
            match OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path) {
                Ok(f) => break (f, name, path),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
                Err(e) => return Err(e),
            }
        };
        let created = Created { name, path };
        // Allocate every page now: a tmpfs too small for the segment (a
        // container's 64 MiB /dev/shm, say) fails here, and the connection
        // stays on TCP, instead of a SIGBUS when a page is first touched.
        use std::os::fd::AsRawFd;
        // SAFETY: posix_fallocate on an open file descriptor we own.
        let err = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        if err != 0 {
            return Err(io::Error::from_raw_os_error(err));
        }
        let seg = Segment::map(&file, len, ring_bytes)?;
        seg.word(RING_BYTES_AT).store(ring_bytes as u64, Ordering::Relaxed);
        seg.word(NONCE_AT).store(random_u64() | 1, Ordering::Relaxed);
        seg.word(MAGIC_AT).store(MAGIC, Ordering::Release);
        Ok((seg, created))
    }

    /// A segment in anonymous shared memory (for tests of the rings).
    #[cfg(test)]
    pub(crate) fn anonymous(ring_bytes: usize) -> Segment {
        let ring_bytes = ring_size(ring_bytes);
        let len = layout_len(ring_bytes);
        // SAFETY: a fresh anonymous mapping, checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(base != libc::MAP_FAILED, "anonymous mapping failed");
        Segment { base: base.cast(), len, ring_bytes }
    }

    /// Opens and maps the segment `name` in `dir`: it must belong to this
    /// user, be a regular file and have the size and magic its header says.
    /// `Ok(None)`: it cannot be opened (not there, not ours: another host
    /// or user); `Err`: it is there but malformed.
    pub(crate) fn open(dir: &Path, name: &str) -> Result<Option<Segment>, String> {
        if !valid_name(name) {
            return Err(format!("`{name}` is not a segment name"));
        }
        let file = match OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW).open(dir.join(name)) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(name, dir = %dir.display(), error = %e, "shared-memory segment cannot be opened");
                return Ok(None);
            }
        };
        let meta = file.metadata().map_err(|e| e.to_string())?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        if !meta.file_type().is_file() || meta.uid() != uid {
            tracing::debug!(name, "shared-memory segment is not a file of this user");
            return Ok(None);
        }
        let len = meta.len() as usize;
        if len < PAGE {
            return Err(format!("segment of {len} bytes is shorter than its header"));
        }
        let head = Segment::map(&file, PAGE, 0).map_err(|e| e.to_string())?;
        if head.word(MAGIC_AT).load(Ordering::Acquire) != MAGIC {
            return Err("segment has no geeps header".into());
        }
        let ring_bytes = head.word(RING_BYTES_AT).load(Ordering::Relaxed) as usize;
        if ring_bytes != ring_size(ring_bytes) || layout_len(ring_bytes) != len {
            return Err(format!("segment of {len} bytes does not hold two rings of {ring_bytes} bytes"));
        }
        drop(head);
        Segment::map(&file, len, ring_bytes).map(Some).map_err(|e| e.to_string())
    }

    fn map(file: &File, len: usize, ring_bytes: usize) -> io::Result<Segment> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of `len` bytes of an open file,
        // checked for failure before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment { base: base.cast(), len, ring_bytes })
    }

    /// The 8-byte word at `offset` (8-aligned, inside the mapping), as an atomic.
    pub(crate) fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.len, "word {offset} outside the segment");
        // SAFETY: in bounds and aligned (the mapping is page-aligned), and
        // only ever accessed atomically by both processes.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// The nonce the keeper wrote (the worker echoes it as proof).
    pub(crate) fn nonce(&self) -> u64 {
        self.word(NONCE_AT).load(Ordering::Relaxed)
    }

    /// Bytes of each ring's data.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }

    /// Offsets of ring `i`'s (0: keeper to worker, 1: worker to keeper)
    /// control page and data.
    pub(crate) fn ring_offsets(&self, i: usize) -> (usize, usize) {
        let ctrl = PAGE + i * (PAGE + self.ring_bytes);
        (ctrl, ctrl + PAGE)
    }

    /// A raw pointer to `offset`, for `len` bytes inside the mapping.
    pub(crate) fn ptr(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset + len <= self.len, "bytes {offset}+{len} outside the segment");
        // SAFETY: in bounds, checked above.
        unsafe { self.base.add(offset) }
    }
}

//! Bytes this process has received over TCP, summed over its open sockets
//! from the kernel's own counters (`TCP_INFO`'s `tcpi_bytes_received`), so
//! the sync scenario reports the bytes each system really moved, headers of
//! its own framing included. It reads counters; it never touches the data.

/// Bytes received so far on every TCP socket this process holds open, or
/// `None` where the kernel does not say (not Linux).
#[cfg(target_os = "linux")]
pub fn received() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    let mut total = 0u64;
    for entry in dir.flatten() {
        let is_socket = std::fs::read_link(entry.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if !is_socket {
            continue;
        }
        // SAFETY: `info` is a plain C struct the kernel fills up to `len`
        // bytes; `fd` may have closed since it was listed, which getsockopt
        // reports as an error (skipped).
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len)
        };
        // Kernels older than the field return a shorter struct.
        let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received) + 8;
        if rc == 0 && len as usize >= needed {
            total += info.tcpi_bytes_received;
        }
    }
    Some(total)
}

#[cfg(not(target_os = "linux"))]
pub fn received() -> Option<u64> {
    None
}

/// Counts a rank's bytes per clock between the start of its first timed
/// clock and the start of its last: both ends then miss alike what faster
/// ranks send early for the clock ahead, which a count to the end of the
/// run would not.
#[derive(Default)]
pub struct Counter {
    first: Option<(usize, u64)>,
    last: Option<(usize, u64)>,
}

impl Counter {
    /// Call at the start of each clock (`0..=clocks`, clock 0 untimed).
    pub fn at_clock(&mut self, clock: usize, clocks: usize) {
        if clock == 1 {
            self.first = received().map(|b| (clock, b));
        }
        if clock == clocks && clock > 1 {
            self.last = received().map(|b| (clock, b));
        }
    }

    pub fn per_clock(&self) -> Option<f64> {
        let ((c0, b0), (c1, b1)) = (self.first?, self.last?);
        Some(b1.saturating_sub(b0) as f64 / (c1 - c0) as f64)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::{Read, Write};

    #[test]
    fn counts_bytes_received_on_a_loopback_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut b, _) = listener.accept().unwrap();
        let before = super::received().unwrap();
        a.write_all(&[7u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        b.read_exact(&mut buf).unwrap();
        let after = super::received().unwrap();
        // Other tests of this binary may hold sockets too: at least ours counted.
        assert!(after - before >= 100_000, "counted {} bytes", after - before);
    }
}

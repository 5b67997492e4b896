//! The listeners' accept back-off: which errors back off, the schedule
//! (10 ms doubling to 1 s, starting over after a success), the log line
//! folded to one per interval with a count, and the loop that sleeps
//! instead of spinning while descriptors are short.

use std::cell::Cell;
use std::io;
use std::time::{Duration, Instant};

use super::{accept_backing_off, classify, AcceptBackoff, AcceptError, LogLimiter, FIRST_DELAY, MAX_DELAY};

fn os(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

#[test]
fn accept_errors_are_classified() {
    for code in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
        assert_eq!(classify(&os(code)), AcceptError::Exhausted, "{}", os(code));
    }
    for code in [libc::ECONNABORTED, libc::ECONNRESET, libc::EPROTO, libc::EINTR, libc::ENETUNREACH] {
        assert_eq!(classify(&os(code)), AcceptError::Connection, "{}", os(code));
    }
    for code in [libc::EBADF, libc::EINVAL, libc::ENOTSOCK] {
        assert_eq!(classify(&os(code)), AcceptError::Listener, "{}", os(code));
    }
    assert_eq!(classify(&io::Error::other("strange")), AcceptError::Unknown);
    assert_eq!(classify(&io::Error::from(io::ErrorKind::ConnectionAborted)), AcceptError::Connection);
}

#[test]
fn the_back_off_doubles_to_a_second_and_starts_over_after_a_success() {
    let mut b = AcceptBackoff::new("test listener");
    let now = Instant::now();
    let emfile = os(libc::EMFILE);
    let delays: Vec<u64> =
        (0..10).map(|_| b.failed(&emfile, AcceptError::Exhausted, now).unwrap().as_millis() as u64).collect();
    assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
    assert_eq!(b.next_delay(), MAX_DELAY);
    // An unknown error backs off too; one connection's error does not, and
    // leaves the back-off where it was.
    assert_eq!(b.failed(&os(libc::ECONNABORTED), AcceptError::Connection, now), Some(Duration::ZERO));
    assert_eq!(b.next_delay(), MAX_DELAY);
    b.succeeded();
    assert_eq!(b.next_delay(), FIRST_DELAY);
    assert_eq!(b.failed(&io::Error::other("?"), AcceptError::Unknown, now), Some(FIRST_DELAY));
    // A broken listener gives up.
    assert_eq!(b.failed(&os(libc::EBADF), AcceptError::Listener, now), None);
}

#[test]
fn failures_are_folded_into_one_line_per_interval_with_a_count() {
    let mut log = LogLimiter::new(Duration::from_secs(1));
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    // The first failure is reported at once.
    assert_eq!(log.note(at(0)), Some(1));
    // A million more within the interval: no line.
    for _ in 0..1_000_000 {
        assert_eq!(log.note(at(500)), None);
    }
    // The next line, an interval later, counts them all.
    assert_eq!(log.note(at(1000)), Some(1_000_001));
    assert_eq!(log.note(at(1999)), None);
    assert_eq!(log.note(at(2000)), Some(2));
    // A reset hands back what was not reported and reports the next at once.
    assert_eq!(log.note(at(2100)), None);
    assert_eq!(log.reset(), 1);
    assert_eq!(log.note(at(2200)), Some(1));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn an_exhausted_listener_sleeps_instead_of_spinning() {
    let calls = Cell::new(0u32);
    let mut b = AcceptBackoff::new("test listener");
    let start = Instant::now();
    let outcome = runtime().block_on(async {
        let always_emfile = || {
            calls.set(calls.get() + 1);
            async { Err::<(), _>(os(libc::EMFILE)) }
        };
        tokio::time::timeout(Duration::from_millis(500), accept_backing_off(&mut b, always_emfile)).await
    });
    assert!(outcome.is_err(), "an exhausted accept returned: {outcome:?}");
    // 10 + 20 + 40 + 80 + 160 ms of sleep fit in 500 ms: about six calls,
    // where a loop without a back-off makes millions.
    assert!(calls.get() <= 10, "{} accept calls in {:?}", calls.get(), start.elapsed());
    assert!(calls.get() >= 2, "{} accept calls", calls.get());
}

#[test]
fn the_loop_goes_on_past_one_connections_error_and_stops_on_a_broken_listener() {
    let rt = runtime();
    let mut b = AcceptBackoff::new("test listener");
    let script = Cell::new(0u32);
    let got = rt.block_on(accept_backing_off(&mut b, || {
        let n = script.get();
        script.set(n + 1);
        async move {
            match n {
                0 | 1 => Err(os(libc::EMFILE)),
                2 => Err(os(libc::ECONNABORTED)),
                _ => Ok(n),
            }
        }
    }));
    assert_eq!(got.unwrap(), 3);
    assert_eq!(b.next_delay(), FIRST_DELAY, "a success starts the back-off over");
    let broken = rt.block_on(accept_backing_off(&mut b, || async { Err::<(), _>(os(libc::EBADF)) }));
    assert_eq!(broken.unwrap_err().raw_os_error(), Some(libc::EBADF));
}

#[test]
fn a_cancelled_back_off_is_slept_out_by_the_next_call() {
    let rt = runtime();
    let mut b = AcceptBackoff::new("test listener");
    // Seven failures: a back-off of 640 ms is due. A call cancelled in that
    // sleep (by the other arm of a `select!`) leaves it in `b`.
    let emfile = os(libc::EMFILE);
    for _ in 0..7 {
        b.failed(&emfile, AcceptError::Exhausted, Instant::now());
    }
    // The next call sleeps it out before it accepts again.
    let start = Instant::now();
    let calls = Cell::new(0u32);
    rt.block_on(accept_backing_off(&mut b, || {
        calls.set(calls.get() + 1);
        async { Ok::<(), io::Error>(()) }
    }))
    .unwrap();
    assert_eq!(calls.get(), 1);
    assert!(start.elapsed() >= Duration::from_millis(500), "accepted after {:?}", start.elapsed());
    // The success ended the back-off: the next accept is at once.
    let start = Instant::now();
    rt.block_on(accept_backing_off(&mut b, || async { Ok::<(), io::Error>(()) })).unwrap();
    assert!(start.elapsed() < Duration::from_millis(500), "accepted after {:?}", start.elapsed());
}

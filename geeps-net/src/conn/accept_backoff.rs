//! What a listener (the keeper's, the rendezvous's) does when `accept`
//! fails: which errors mean the process is out of descriptors or memory,
//! which belong to one connection and which to the listener itself; the
//! exponential back-off while resources are short; and the log line folded
//! to one per interval with a count. It never reads from or closes a
//! connection, and never retries an exhausted accept without sleeping.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

/// The first back-off after an accept error that means resources are short.
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(10);
/// The longest back-off: a listener retries at least this often.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(1);
/// At most one warning per interval while accepts fail.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// What an accept error says about whether the next accept can succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcceptError {
    /// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the
    /// next accept fails the same way until something is freed; back off.
    Exhausted,
    /// One connection's own failure (aborted, reset, a network error the
    /// kernel passes on): the next accept is unaffected; go on at once.
    Connection,
    /// The listener itself is unusable (EBADF, EINVAL, ENOTSOCK, EFAULT):
    /// retrying cannot help.
    Listener,
    /// Anything else: back off as for `Exhausted`, so that an unknown error
    /// can never make the loop spin.
    Unknown,
}

/// Classifies an error `accept` returned.
pub(crate) fn classify(e: &io::Error) -> AcceptError {
    if let Some(code) = e.raw_os_error() {
        return match code {
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => AcceptError::Exhausted,
            // accept(2): Linux passes a new connection's pending network
            // errors on from accept; they say nothing about the next one.
            libc::ECONNABORTED
            | libc::ECONNRESET
            | libc::EPROTO
            | libc::EPERM
            | libc::EINTR
            | libc::EAGAIN
            | libc::ETIMEDOUT
            | libc::ENETDOWN
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::EHOSTUNREACH
            | libc::ENOPROTOOPT
            | libc::EOPNOTSUPP => AcceptError::Connection,
            libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT => AcceptError::Listener,
            _ => AcceptError::Unknown,
        };
    }
    match e.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock => AcceptError::Connection,
        _ => AcceptError::Unknown,
    }
}

/// Folds events into one report per `interval`: the first event reports at
/// once, later ones are counted until the interval has passed.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    interval: Duration,
    last: Option<Instant>,
    unreported: u64,
}

impl LogLimiter {
    pub(crate) fn new(interval: Duration) -> Self {
        LogLimiter { interval, last: None, unreported: 0 }
    }

    /// Counts one event at `now`; `Some(n)` when a line is due, `n` being
    /// the events since the last line (this one included).
    pub(crate) fn note(&mut self, now: Instant) -> Option<u64> {
        self.unreported += 1;
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.interval => None,
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.unreported))
            }
        }
    }

    /// The events counted since the last line, forgetting them and the
    /// interval: the next event reports at once.
    pub(crate) fn reset(&mut self) -> u64 {
        self.last = None;
        std::mem::take(&mut self.unreported)
    }
}

/// One listener's back-off and its log lines. `what` names the listener in
/// every line ("keeper shard 0", "rendezvous").
#[derive(Debug)]
pub(crate) struct AcceptBackoff {
    what: String,
    delay: Option<Duration>,
    /// When the current back-off ends: a call cancelled mid-sleep resumes it.
    resume_at: Option<Instant>,
    log: LogLimiter,
}

impl AcceptBackoff {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        AcceptBackoff { what: what.into(), delay: None, resume_at: None, log: LogLimiter::new(LOG_INTERVAL) }
    }

    /// After an error of class `class` at `now`: how long to sleep before
    /// the next accept (zero: at once), or `None`: give up. Logs when due.
    pub(crate) fn failed(&mut self, e: &io::Error, class: AcceptError, now: Instant) -> Option<Duration> {
        match class {
            AcceptError::Connection => {
                tracing::debug!(listener = %self.what, error = %e, "accept failed for one connection; going on");
                Some(Duration::ZERO)
            }
            AcceptError::Listener => {
                tracing::error!(listener = %self.what, error = %e, "accept failed: the listener is unusable");
                None
            }
            AcceptError::Exhausted | AcceptError::Unknown => {
                let delay = self.delay.map_or(FIRST_DELAY, |d| (d * 2).min(MAX_DELAY));
                self.delay = Some(delay);
                self.resume_at = Some(now + delay);
                if let Some(count) = self.log.note(now) {
                    let hint = if class == AcceptError::Exhausted {
                        "; raise the open-file limit (ulimit -n) or find who holds the connections"
                    } else {
                        ""
                    };
                    tracing::warn!(
                        listener = %self.what,
                        failures = count,
                        "{}: accept failed {count} time(s) since the last line: {e}; backing off {} ms{hint}",
                        self.what,
                        delay.as_millis()
                    );
                }
                Some(delay)
            }
        }
    }

    /// After an accept succeeded: the back-off starts over, and failures
    /// not yet logged are.
    pub(crate) fn succeeded(&mut self) {
        self.resume_at = None;
        if self.delay.take().is_some() {
            let unlogged = self.log.reset();
            tracing::info!(
                listener = %self.what,
                "{}: accepting again ({unlogged} more failed accept(s) since the last line)",
                self.what
            );
        }
    }

    /// The sleep the next resource failure would get (for tests).
    #[cfg(test)]
    pub(crate) fn next_delay(&self) -> Duration {
        self.delay.map_or(FIRST_DELAY, |d| (d * 2).min(MAX_DELAY))
    }
}

/// Calls `accept` until it yields a connection, sleeping as `backoff` says
/// between failures; an error only when the listener is unusable. Safe to
/// cancel (as in `select!`) when `accept` is: the back-off's end lives in
/// `backoff`, and the next call sleeps out what is left of it first.
pub(crate) async fn accept_backing_off<T, F, Fut>(backoff: &mut AcceptBackoff, mut accept: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = io::Result<T>>,
{
    loop {
        if let Some(at) = backoff.resume_at {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
        match accept().await {
            Ok(conn) => {
                backoff.succeeded();
                return Ok(conn);
            }
            Err(e) => match backoff.failed(&e, classify(&e), Instant::now()) {
                None => return Err(e),
                Some(d) if d.is_zero() => tokio::task::yield_now().await,
                // The sleep happens at the top of the loop, from resume_at.
                Some(_) => {}
            },
        }
    }
}

#[cfg(test)]
#[path = "../../tests/unit/accept_backoff_tests.rs"]
mod accept_backoff_tests;

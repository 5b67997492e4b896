//! Admission of peers: the cluster token check, a constant-time comparison
//! (`subtle`) so the time a refusal takes says nothing about how much of a
//! guess was right, and the bound on connections still in their handshake.

use subtle::ConstantTimeEq;

/// Whether `given` equals the cluster's `expected` token. Takes the same
/// time for every `given` of a length (and depends on `expected`'s length
/// only otherwise): the comparison never stops at the first differing byte.
pub(crate) fn token_matches(expected: &str, given: &str) -> bool {
    let (e, g) = (expected.as_bytes(), given.as_bytes());
    let mut same = (e.len() as u64).ct_eq(&(g.len() as u64));
    for (i, byte) in e.iter().enumerate() {
        same &= byte.ct_eq(g.get(i).unwrap_or(&0));
    }
    bool::from(same)
}

/// Admission of connections not yet through their handshake: at most
/// `limit` at once; beyond that new ones are closed at once. A full gate is
/// logged once, and again (with the count closed) when it opens.
pub(crate) struct PendingGate {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    limit: usize,
    what: &'static str,
    closed: u64,
}

impl PendingGate {
    pub(crate) fn new(limit: usize, what: &'static str) -> Self {
        PendingGate { permits: std::sync::Arc::new(tokio::sync::Semaphore::new(limit)), limit, what, closed: 0 }
    }

    /// A permit to hold until the handshake is done, or `None`: close the connection.
    pub(crate) fn admit(&mut self, addr: std::net::SocketAddr) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                if self.closed > 0 {
                    tracing::info!(
                        what = self.what,
                        closed = self.closed,
                        "fewer connections wait for their handshake again; accepting"
                    );
                    self.closed = 0;
                }
                Some(permit)
            }
            Err(_) => {
                if self.closed == 0 {
                    tracing::warn!(
                        what = self.what,
                        %addr,
                        limit = self.limit,
                        "{} connections are waiting for their handshake (max_pending_connections); closing new ones until some finish (logged once)",
                        self.limit
                    );
                }
                self.closed += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::token_matches;

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(token_matches("s3cret", "s3cret"));
        assert!(token_matches("", ""));
        for wrong in ["", "s3cre", "s3cret!", "s3creT", "S3cret", "s3cret\0", "xxxxxx"] {
            assert!(!token_matches("s3cret", wrong), "{wrong:?}");
        }
        // A prefix padded with zero bytes is not the token either.
        assert!(!token_matches("ab\0", "ab"));
        assert!(!token_matches("ab", "ab\0"));
        assert!(!token_matches("", "x"));
    }
}

//! Network options shared by keepers, workers and the rendezvous. Defaults
//! are production values; every wait they bound ends in an error naming the
//! peer, never in a silent hang.

use std::time::Duration;

/// Options of a networked cluster member: start from
/// [`NetOptions::default`] and change what differs (fields may be added in a
/// minor release).
///
/// ```
/// use std::time::Duration;
/// use geeps_net::NetOptions;
///
/// let options = NetOptions::default().with_token("s3cret").with_peer_timeout(Duration::from_secs(60));
/// assert_eq!(options.heartbeat, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NetOptions {
    /// Shared secret: a peer with another token is refused at join.
    pub token: String,
    /// A peer silent for this long (no data, no heartbeat) is lost.
    pub peer_timeout: Duration,
    /// How long to keep retrying to reach a peer that has not started yet.
    pub connect_timeout: Duration,
    /// Idle connections send a heartbeat this often.
    pub heartbeat: Duration,
    /// Largest frame payload accepted, bytes.
    pub max_message_bytes: u64,
    /// How long shutdown waits for the other workers to leave.
    pub shutdown_timeout: Duration,
}

impl Default for NetOptions {
    fn default() -> Self {
        NetOptions {
            token: String::new(),
            peer_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(60),
            heartbeat: Duration::from_secs(1),
            max_message_bytes: 1 << 30,
            shutdown_timeout: Duration::from_secs(60),
        }
    }
}

impl NetOptions {
    /// Sets [`NetOptions::token`].
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = token.into();
        self
    }

    /// Sets [`NetOptions::peer_timeout`].
    pub fn with_peer_timeout(mut self, timeout: Duration) -> Self {
        self.peer_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::connect_timeout`].
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`NetOptions::heartbeat`].
    pub fn with_heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// Sets [`NetOptions::max_message_bytes`].
    pub fn with_max_message_bytes(mut self, bytes: u64) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`NetOptions::shutdown_timeout`].
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }
}

//! Network options shared by keepers, workers and the rendezvous. Defaults
//! are production values; every wait they bound ends in an error naming the
//! peer, never in a silent hang.

use std::time::Duration;

/// Options of a networked cluster member.
#[derive(Debug, Clone)]
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

//! Who may join: the cluster token and the bound on connections still in
//! their handshake, and mutual TLS for keeper connections. It never reads
//! frames of a joined peer.

pub(crate) mod auth;
pub(crate) mod tls;

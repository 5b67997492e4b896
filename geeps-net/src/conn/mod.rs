//! One connection to a peer, as keepers and workers both use it: its two
//! halves over TCP, TLS or shared memory, the options its socket gets, the
//! task that writes its queued frames, and the order of a rank's updates
//! and publications on its uplink; and what a listener does when
//! accepting one fails. It never decides what a frame means.

pub(crate) mod accept_backoff;
pub(crate) mod peer_stream;
pub(crate) mod socket_options;
pub(crate) mod uplink_gate;
pub(crate) mod writer;

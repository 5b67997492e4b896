//! One connection to a peer, as keepers and workers both use it: its two
//! halves over TCP, TLS or shared memory, the options its socket gets, and
//! the task that writes its queued frames; and what a listener does when
//! accepting one fails. It never decides what a frame means.

pub(crate) mod accept_backoff;
pub(crate) mod peer_stream;
pub(crate) mod socket_options;
pub(crate) mod writer;

//! One connection to a peer, as keepers and workers both use it: its two
//! halves over TCP, TLS or shared memory, and the task that writes its
//! queued frames. It never decides what a frame means.

pub(crate) mod peer_stream;
pub(crate) mod writer;

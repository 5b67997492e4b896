//! The rendezvous messages: a rank registering where its keeper listens,
//! and the roster of every keeper's address it gets back. Schema only.

/// Rendezvous: a rank announces where its keeper listens.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Register {
    #[prost(uint32, tag = "1")]
    pub protocol: u32,
    #[prost(string, tag = "2")]
    pub token: String,
    #[prost(uint32, tag = "3")]
    pub rank: u32,
    #[prost(uint32, tag = "4")]
    pub world: u32,
    #[prost(string, tag = "5")]
    pub address: String,
}

/// Rendezvous: every rank's keeper address, by rank.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Roster {
    #[prost(string, repeated, tag = "1")]
    pub addresses: Vec<String>,
}

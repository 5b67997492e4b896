//! The messages that carry rows: an update batch's header (its deltas
//! follow as the payload) and a publication's header (the rows follow).
//! Schema only; encoding the deltas is `bf16`'s job, applying them the
//! keeper's.

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UpdateHeader {
    #[prost(uint32, tag = "1")]
    pub table: u32,
    #[prost(uint32, tag = "2")]
    pub partition: u32,
    #[prost(uint32, tag = "3")]
    pub worker: u32,
    #[prost(uint64, tag = "4")]
    pub clock: u64,
    /// False when the batch only ends the clock (no payload).
    #[prost(bool, tag = "5")]
    pub has_deltas: bool,
    /// How the deltas are encoded: an [`Encoding`](super::Encoding) number.
    #[prost(uint32, tag = "6")]
    pub encoding: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PublishHeader {
    #[prost(uint32, tag = "1")]
    pub table: u32,
    #[prost(uint32, tag = "2")]
    pub partition: u32,
    #[prost(uint64, tag = "3")]
    pub age: u64,
    #[prost(uint64, repeated, tag = "4")]
    pub included: Vec<u64>,
    /// How the rows are encoded: an [`Encoding`](super::Encoding) number.
    /// f32: the partition's rows. bf16: the change since the last rows of
    /// this partition on this connection, which the worker adds to them
    /// (`bf16_rows`).
    #[prost(uint32, tag = "5")]
    pub encoding: u32,
    /// f32 rows that bf16 changes will follow: the worker keeps a copy.
    #[prost(bool, tag = "6")]
    pub base: bool,
}

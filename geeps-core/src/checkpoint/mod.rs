//! The checkpoint format: a folder per checkpoint with the rows of every
//! parameter table, each worker's own state and a manifest, published
//! atomically. The calls that fill and read it (`Geeps::checkpoint`,
//! `Geeps::restore`) live with the instance; this module must never touch an
//! instance.

pub(crate) mod layout;
pub(crate) mod manifest;

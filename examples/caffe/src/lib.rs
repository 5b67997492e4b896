//! caffe-geeps: a Caffe-style trainer whose parameters and activations live
//! in geeps, the way GeePS-Caffe keeps them (the GeePS paper, Algorithm 1).
//!
//! It reads Caffe's own net and solver prototxt files, keeps each layer's
//! parameters in rows of its own geeps table and every blob, gradient and
//! solver history as geeps local data, and trains data-parallel: every
//! worker runs forward and backward on its slice of the data, and geeps
//! sums the workers' updates (BSP, SSP or asynchronous). The `caffe-geeps`
//! binary is the command line; `docs/caffe.md` is the guide.
//!
//! Modules, by job: `proto` (file formats), `data` (IDX images), `layers`
//! and `blas` (compute on the CPU), `gpu` (the same on a CUDA GPU), `net` (wiring a phase's layers),
//! `params` and `solver` (parameters and Caffe's solvers), `plain` (running
//! a net on plain memory), `ps` (everything geeps), `cluster` (how ranks connect),
//! `train` (the schedule), `report` and `plot` (what the user sees),
//! `cli_args` (the command line as Caffe users type it).

pub mod blas;
pub mod cli;
pub mod data;
pub mod error;
pub mod gpu;
pub mod layers;
pub mod memory;
pub mod net;
pub mod params;
pub mod plain;
pub mod plot;
pub mod proto;
pub mod ps;
pub mod report;
pub mod solvers;
pub mod splits;
pub mod tools;
pub mod train;

pub use error::{Error, Result};

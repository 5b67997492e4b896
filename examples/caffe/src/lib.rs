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
//! Modules, by job, as Caffe lays out its sources: `proto` (file formats and
//! the settings read from them), `data` (datasets, LMDB and the Data
//! layer's transform), `layers` (one folder per layer type, its CPU and GPU
//! code and CUDA kernel), `util` (the CPU matrix products), `gpu` (the
//! device, kernel loading and cuBLAS), `net` (a phase's layers wired, its
//! parameters, running it on plain memory), `solvers` (Caffe's solvers and
//! the training schedule, `solve`), `ps` (everything geeps), `tools`
//! (convert, mean, time) and `cli` (the command line, how ranks connect,
//! and what the user sees).

pub mod cli;
pub mod data;
pub mod error;
pub mod gpu;
pub mod hdf5;
pub mod layers;
pub mod net;
pub mod proto;
pub mod ps;
pub mod solvers;
pub mod tools;
pub mod util;

pub use error::{Error, Result};

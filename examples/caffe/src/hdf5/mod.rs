//! HDF5 for Caffe's HDF5 files: snapshots (`snapshot_format: HDF5`,
//! `.caffemodel.h5` and `.solverstate.h5` in Caffe's layout) and the
//! `HDF5Data` layer's sources. The library is loaded at run time (`sys`),
//! so only these features need it installed. This file only declares the
//! modules; it must never define an item of its own.

mod availability;
mod caffe_layout;
mod file;
mod sys;

pub use availability::{available, available_for};

pub use caffe_layout::{
    read_caffemodel_h5, read_solverstate_h5, write_caffemodel_h5, write_solverstate_h5, SolverStateH5,
};
pub use file::H5File;

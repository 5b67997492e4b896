//! Caffe's tools beside training: making LMDBs and mean files
//! (`convert`) and timing a net's layers (`timing`). Must never train.

pub mod convert;
pub mod timing;

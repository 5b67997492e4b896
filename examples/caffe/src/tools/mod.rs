//! Caffe's tools beside training: making LMDBs (`convert`), mean files
//! (`mean`) and timing a net's layers (`time`). Must never train.

pub mod convert;
pub mod mean;
pub mod time;

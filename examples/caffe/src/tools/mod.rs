//! Caffe's tools beside training: making LMDBs (`convert`), mean files
//! (`mean`), timing a net's layers (`time`) and scoring weights (`score`,
//! Caffe's `test`), the last two on the CPU or one GPU (`runner`,
//! `gpu_net`). Must never train.

pub mod convert;
pub mod gpu_net;
pub mod mean;
pub mod runner;
pub mod score;
pub mod time;

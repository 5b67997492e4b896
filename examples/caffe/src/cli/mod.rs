//! What the command line needs besides its commands: Caffe's flag spellings
//! (`args`), how ranks of a cluster connect (`cluster`), restarting as one
//! process per GPU (`launch`), the signals a run obeys (`signals`), and
//! what the user sees: where it computes (`device_log`), the progress and
//! log lines (`report`) and the learning-curve picture (`plot`). Must
//! never train by itself.

pub mod args;
pub mod cluster;
pub mod device_log;
pub mod launch;
pub mod plot;
pub mod report;
pub mod signals;

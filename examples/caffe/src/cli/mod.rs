//! What the command line needs besides its commands: Caffe's flag spellings
//! (`args`), how ranks of a cluster connect (`cluster`), restarting as one
//! process per GPU (`launch`) and the signals a run obeys (`signals`).
//! Must never train by itself.

pub mod args;
pub mod cluster;
pub mod launch;
pub mod signals;

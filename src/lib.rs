pub use geeps_core::*;

//! geeps-ffi (being built).

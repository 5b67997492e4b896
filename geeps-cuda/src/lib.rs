//! geeps-cuda (being built).

//! geeps-net (being built).

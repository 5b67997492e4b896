//! geeps-caffe (being built).

//! Caffe's file formats: the protobuf text format (`text`, `fields`), the
//! net and solver messages read from it (`net`, `solver`), and the binary
//! `.caffemodel` weights (`caffemodel`). Nothing here runs a net.

pub mod caffemodel;
pub mod fields;
pub mod net;
pub mod solver;
pub mod text;

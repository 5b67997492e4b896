//! A blob's shape (Caffe's `BlobShape`) as the settings and the layers
//! write it. It owns the type only; it must never hold a blob's values.

/// A blob's shape: (num, channels, height, width) or (num, features).
pub type Shape = Vec<usize>;

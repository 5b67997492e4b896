//! Caffe's data side: the sources a `Data` layer reads (IDX files or an LMDB
//! of Datums) and an `ImageData` layer reads (a list of image files), each
//! worker's slice of them, the `.h5` files an `HDF5Data` layer reads, Datums and encoded images, and Caffe's
//! DataTransformer (on the CPU here, its GPU kernel `transform.cu` beside
//! it). Must never know about layers or geeps.

pub mod dataset;
pub mod datum;
pub mod hdf5_data;
pub mod image_list;
pub mod label_limit;
pub mod lmdb;
pub mod lmdb_data;
pub mod memory_data;
pub mod pixel_source;
pub mod transform;

pub(crate) use dataset::read_idx;
pub use dataset::{resolve_source, Cursor, DataCache, Dataset, Source, FEED_CALL};
pub use label_limit::LabelLimit;

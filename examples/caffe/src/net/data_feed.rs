//! A data layer's next batch written into its tops, whatever the source:
//! an image source (LMDB, IDX, image list) fills the data top and the
//! label (read and dropped without a label top, as Caffe's), an HDF5
//! source fills one top per dataset. It owns that dispatch; it must never
//! choose which items come next (the caller's `data::Cursor` does) or
//! know where the tops live.

use crate::data::Source;
use crate::error::{Error, Result};
use crate::net::DataSource;

/// Fills `tops` (the layer's tops, in order) with items `indices`;
/// `seed` draws TRAIN's crops and mirrors.
pub fn fill_tops(src: &DataSource, indices: &[usize], train: bool, seed: u64, tops: &mut [&mut [f32]]) -> Result<()> {
    let limit = src.label_limit.get();
    if let Source::Hdf5(h) = &*src.set {
        return h.fill(indices, limit, tops);
    }
    // Without a label top the labels are read and dropped, as Caffe's.
    let mut dropped = vec![0.0; if tops.len() < 2 { indices.len() } else { 0 }];
    match tops {
        [data, label, ..] => src.set.fill(indices, &src.transform, train, seed, limit, data, label),
        [data] => src.set.fill(indices, &src.transform, train, seed, limit, data, &mut dropped),
        [] => Err(Error::config("a data layer without a top has nothing to fill")),
    }
}

//! The `Data` layer's LMDB source: records decoded as Datums, every record
//! the same size, batches filled through Caffe's transform (crop, mirror,
//! mean, scale). Which records a worker takes is `data::Cursor`'s job (its
//! disjoint shard); this module owns decoding and filling, and must never
//! decide the order.

use std::path::Path;

use crate::data::datum::{Image, Values};
use crate::data::label_limit::LabelLimit;
use crate::data::lmdb::LmdbReader;
use crate::data::pixel_source::PixelSource;
use crate::data::transform::{Pixels, TransformConf};
use crate::error::{Error, Result};

#[derive(Debug)]
pub struct LmdbData {
    pub reader: LmdbReader,
    /// Every record's (channels, height, width), from the first one.
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl LmdbData {
    /// Opens the database; the first record gives every record's size
    /// (each batch checks its records against it, and their labels against
    /// the net's class count: a large database is never read whole).
    pub fn open(path: &Path) -> Result<LmdbData> {
        let reader = LmdbReader::open(path)?;
        let mut shape = (0, 0, 0);
        reader.with_values(&[0], |_, bytes| {
            let img = Image::from_datum_bytes(bytes).map_err(|e| Error::file(path, format!("record 0: {e}")))?;
            shape = (img.channels, img.height, img.width);
            Ok(())
        })?;
        Ok(LmdbData { reader, channels: shape.0, height: shape.1, width: shape.2 })
    }

    pub fn len(&self) -> usize {
        self.reader.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// The (channels, height, width) a batch image has after `t`.
    pub fn output_shape(&self, t: &TransformConf) -> Result<(usize, usize, usize)> {
        t.output_shape(self.channels, self.height, self.width).map_err(|e| Error::file(self.reader.path(), e))
    }

    /// Decodes records `indices` in order and hands each (position, values,
    /// label) to `each`, after checking its size and its label.
    fn for_each(
        &self,
        indices: &[usize],
        limit: Option<&LabelLimit>,
        mut each: impl FnMut(usize, Pixels<'_>, f32),
    ) -> Result<()> {
        let path = self.reader.path();
        self.reader.with_values(indices, |k, bytes| {
            let img =
                Image::from_datum_bytes(bytes).map_err(|e| Error::file(path, format!("record {}: {e}", indices[k])))?;
            if (img.channels, img.height, img.width) != (self.channels, self.height, self.width) {
                return Err(Error::file(
                    path,
                    format!(
                        "record {} is {}x{}x{} but record 0 is {}x{}x{}; resize the images when converting",
                        indices[k], img.channels, img.height, img.width, self.channels, self.height, self.width
                    ),
                ));
            }
            if let Some(lim) = limit {
                if img.label < 0 || img.label as usize >= lim.classes {
                    return Err(Error::file(
                        path,
                        format!(
                            "record {} has label {} but layer `{}` scores only {} classes; raise its num_output",
                            indices[k], img.label, lim.layer, lim.classes
                        ),
                    ));
                }
            }
            let px = match &img.values {
                Values::Bytes(b) => Pixels::Bytes(b),
                Values::Floats(f) => Pixels::Floats(f),
            };
            each(k, px, img.label as f32);
            Ok(())
        })
    }
}

impl PixelSource for LmdbData {
    fn stored_shape(&self) -> (usize, usize, usize) {
        (self.channels, self.height, self.width)
    }

    fn output_shape_of(&self, t: &TransformConf) -> Result<(usize, usize, usize)> {
        self.output_shape(t)
    }

    fn each_image(
        &self,
        indices: &[usize],
        limit: Option<&LabelLimit>,
        each: &mut dyn FnMut(usize, Pixels<'_>, f32),
    ) -> Result<()> {
        self.for_each(indices, limit, each)
    }
}

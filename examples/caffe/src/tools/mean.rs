//! Caffe's `compute_image_mean`: the mean image of an LMDB of Datums,
//! written as a `.binaryproto`, with each channel's mean for the log. It
//! owns that average; it must never write a database.

use std::path::Path;

use crate::data::datum::{encode_mean, Image, Values};
use crate::data::lmdb::LmdbReader;
use crate::error::{Error, Result};

/// The mean image of the LMDB `db`, written to `out` as a `.binaryproto`;
/// returns (channels, height, width) and each channel's mean.
pub fn compute_image_mean(db: &Path, out: &Path) -> Result<((usize, usize, usize), Vec<f32>)> {
    let reader = LmdbReader::open(db)?;
    let mut sum: Vec<f64> = Vec::new();
    let mut shape = (0, 0, 0);
    let all: Vec<usize> = (0..reader.len()).collect();
    reader.with_values(&all, |k, bytes| {
        let img = Image::from_datum_bytes(bytes).map_err(|e| Error::file(db, format!("record {k}: {e}")))?;
        let s = (img.channels, img.height, img.width);
        if k == 0 {
            shape = s;
            sum = vec![0.0; s.0 * s.1 * s.2];
        } else if s != shape {
            return Err(Error::file(
                db,
                format!("record {k} is {s:?} but record 0 is {shape:?}; a mean needs one size"),
            ));
        }
        match &img.values {
            Values::Bytes(b) => sum.iter_mut().zip(b).for_each(|(a, v)| *a += f64::from(*v)),
            Values::Floats(f) => sum.iter_mut().zip(f).for_each(|(a, v)| *a += f64::from(*v)),
        }
        Ok(())
    })?;
    let n = reader.len() as f64;
    let mean: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
    let plane = shape.1 * shape.2;
    let per_channel = mean
        .chunks(plane.max(1))
        .map(|c| (c.iter().map(|v| f64::from(*v)).sum::<f64>() / plane as f64) as f32)
        .collect();
    std::fs::write(out, encode_mean(shape.0, shape.1, shape.2, &mean))
        .map_err(|e| Error::file(out, format!("cannot write the mean: {e}")))?;
    Ok((shape, per_channel))
}

//! The Data layer's transform on the GPU: a batch as stored (bytes or
//! floats), its placements and the mean go up in one scratch buffer, and a
//! kernel writes the transformed images straight into the data blob — a
//! quarter of the bytes over the bus for byte images, and the same bits as
//! the CPU transform. It never reads a database (the source does that).

use super::{holds, Arg, DevSlice, Gpu};
use crate::data::transform::{Mean, RawBatch, RawPixels, TransformConf};
use crate::error::{Error, Result};

impl Gpu {
    /// Transforms `batch` by `t` into `data` (images × output shape) and
    /// writes its labels into `label`.
    pub fn transform(&self, t: &TransformConf, batch: &RawBatch, data: DevSlice, label: DevSlice) -> Result<()> {
        let (c, h, w) = batch.shape;
        let (_, oh, ow) = t.output_shape(c, h, w).map_err(Error::config)?;
        let num = batch.placements.len();
        holds(data, num * c * oh * ow, "Data layer top")?;
        // A Data layer without a label top reads its labels and drops them.
        if !label.is_empty() {
            self.upload(&batch.labels, label)?;
        }
        let (mean_kind, mean): (u32, Vec<f32>) = match &t.mean {
            Mean::None => (0, Vec::new()),
            Mean::Image { values, .. } => (1, values.clone()),
            Mean::Values(_) => (2, t.channel_means(c)),
        };
        let placements: Vec<u32> =
            batch.placements.iter().flat_map(|p| [p.h_off as u32, p.w_off as u32, u32::from(p.mirror)]).collect();
        // (values, floats of scratch they take, kernel)
        let (values, pixel_floats, name) = match &batch.pixels {
            RawPixels::Bytes(b) => (b.len(), b.len().div_ceil(4), "transform_bytes"),
            RawPixels::Floats(f) => (f.len(), f.len(), "transform_floats"),
        };
        if values < num * c * h * w {
            return Err(Error::Gpu(format!("a raw batch of {num} images holds too few pixels")));
        }
        let total = pixel_floats + placements.len() + mean.len();
        self.with_scratch(total, |s| {
            let (pixels, placed, means) = (
                s.slice(0, pixel_floats)?,
                s.slice(pixel_floats, placements.len())?,
                s.slice(pixel_floats + placements.len(), mean.len())?,
            );
            match &batch.pixels {
                RawPixels::Bytes(b) => self.upload_words(b, pixels)?,
                RawPixels::Floats(f) => self.upload(f, pixels)?,
            }
            self.upload_words(&placements, placed)?;
            self.upload(&mean, means)?;
            let mut args = vec![
                Arg::Dev(pixels),
                Arg::Dev(data),
                Arg::Dev(placed),
                Arg::Dev(means),
                Arg::U32(mean_kind),
                Arg::count(num)?,
            ];
            for d in [c, h, w, oh, ow] {
                args.push(Arg::dim(d)?);
            }
            args.push(Arg::F32(t.scale));
            // SAFETY: the pixels hold num·c·h·w values (checked above), the
            // placements 3 per image, the mean what `mean_kind` reads, and
            // `data` the output (checked by `holds`).
            unsafe { self.launch_n(name, num * c * oh * ow, &args)? };
            Ok(())
        })
    }
}

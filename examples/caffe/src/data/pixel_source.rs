//! What the decoded data sources (LMDB records, image lists) share: a batch
//! filled and transformed on the CPU, or handed over as stored with where
//! the transform places each image (for a transform on the GPU), both from
//! one walk over the images with the same random draws. It owns those two
//! walks; it never decodes (each source's `for_each` does).

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::data::label_limit::LabelLimit;
use crate::data::transform::{Pixels, RawBatch, TransformConf};
use crate::error::Result;

pub trait PixelSource {
    /// Channels, height and width of every stored image.
    fn stored_shape(&self) -> (usize, usize, usize);

    /// The shape `t` turns a stored image into.
    fn output_shape_of(&self, t: &TransformConf) -> Result<(usize, usize, usize)>;

    /// Decodes images `indices` in order and hands each (position, pixels,
    /// label) to `each`, after checking its label against `limit`.
    fn each_image(
        &self,
        indices: &[usize],
        limit: Option<&LabelLimit>,
        each: &mut dyn FnMut(usize, Pixels<'_>, f32),
    ) -> Result<()>;

    /// Writes images `indices`, transformed by `t`, into `data` and their
    /// labels into `label`. TRAIN randomness (crops, mirrors) comes from `seed`.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        indices: &[usize],
        t: &TransformConf,
        train: bool,
        seed: u64,
        limit: Option<&LabelLimit>,
        data: &mut [f32],
        label: &mut [f32],
    ) -> Result<()> {
        let (c, h, w) = self.output_shape_of(t)?;
        let per = c * h * w;
        let (sc, sh, sw) = self.stored_shape();
        let mut rng = StdRng::seed_from_u64(seed);
        self.each_image(indices, limit, &mut |k, px, l| {
            t.apply(px, sc, sh, sw, train, &mut rng, &mut data[k * per..(k + 1) * per]);
            label[k] = l;
        })
    }

    /// Images `indices` as stored, each with where `t` places it (the same
    /// draws from `seed` as [`PixelSource::fill`]), for a transform elsewhere.
    fn raw_batch(
        &self,
        indices: &[usize],
        t: &TransformConf,
        train: bool,
        seed: u64,
        limit: Option<&LabelLimit>,
    ) -> Result<RawBatch> {
        self.output_shape_of(t)?;
        let mut rng = StdRng::seed_from_u64(seed);
        let shape = self.stored_shape();
        let mut batch = RawBatch::new(shape, indices.len());
        self.each_image(indices, limit, &mut |_, px, l| {
            batch.push(px, t.place(shape.0, shape.1, shape.2, train, &mut rng), l);
        })?;
        Ok(batch)
    }
}

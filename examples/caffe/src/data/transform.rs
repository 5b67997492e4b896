//! Caffe's DataTransformer for one image (C×H×W, bytes or floats): crop
//! (random offsets in TRAIN, centred in TEST), mirror (a coin per image,
//! TRAIN only), mean subtraction (a mean image the size of the uncropped
//! input, or one value per channel, or one for all) and then scale:
//! `out = (x − mean) · scale`. It owns that arithmetic and its checks; it
//! must never read files or know where images come from.

use rand::Rng;

/// What is subtracted before scaling.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Mean {
    #[default]
    None,
    /// A mean image (a `mean_file`), C×H×W like the uncropped input.
    Image { channels: usize, height: usize, width: usize, values: Vec<f32> },
    /// `mean_value`: one for every channel, or one per channel.
    Values(Vec<f32>),
}

/// `transform_param`.
#[derive(Debug, Clone, PartialEq)]
pub struct TransformConf {
    pub scale: f32,
    pub mirror: bool,
    /// 0: no crop.
    pub crop_size: usize,
    pub mean: Mean,
}

impl Default for TransformConf {
    fn default() -> Self {
        TransformConf { scale: 1.0, mirror: false, crop_size: 0, mean: Mean::None }
    }
}

/// An image's values, as a `Datum` holds them.
#[derive(Debug, Clone, Copy)]
pub enum Pixels<'a> {
    Bytes(&'a [u8]),
    Floats(&'a [f32]),
}

impl Pixels<'_> {
    fn get(&self, i: usize) -> f32 {
        match self {
            Pixels::Bytes(b) => f32::from(b[i]),
            Pixels::Floats(f) => f[i],
        }
    }

    fn len(&self) -> usize {
        match self {
            Pixels::Bytes(b) => b.len(),
            Pixels::Floats(f) => f.len(),
        }
    }
}

impl TransformConf {
    /// The output (channels, height, width) for inputs of (c, h, w), or what
    /// is wrong with the settings for such inputs.
    pub fn output_shape(&self, c: usize, h: usize, w: usize) -> Result<(usize, usize, usize), String> {
        if self.crop_size > h || self.crop_size > w {
            return Err(format!("crop_size {} is larger than the {h}x{w} images", self.crop_size));
        }
        match &self.mean {
            Mean::Image { channels, height, width, .. } if (*channels, *height, *width) != (c, h, w) => {
                return Err(format!(
                    "the mean image is {channels}x{height}x{width} but the images are {c}x{h}x{w}; \
                     make the mean from the same data (compute-image-mean)"
                ))
            }
            Mean::Values(v) if v.len() != 1 && v.len() != c => {
                return Err(format!(
                    "{} mean_value entries for {c}-channel images; give one, or one per channel",
                    v.len()
                ))
            }
            _ => {}
        }
        Ok(if self.crop_size > 0 { (c, self.crop_size, self.crop_size) } else { (c, h, w) })
    }

    /// Where one image's crop window sits and whether it is mirrored:
    /// `train` draws the crop offsets, then the mirror coin, from `rng`
    /// (nothing is drawn for what the settings leave off); otherwise the
    /// crop is centred and nothing is mirrored. The shapes must have passed
    /// `output_shape`.
    pub fn place(&self, c: usize, h: usize, w: usize, train: bool, rng: &mut impl Rng) -> Placement {
        let (_, oh, ow) = self.output_shape(c, h, w).unwrap_or((c, h, w));
        let (h_off, w_off) = match (self.crop_size, train) {
            (0, _) => (0, 0),
            (_, true) => (rng.gen_range(0..=h - oh), rng.gen_range(0..=w - ow)),
            (_, false) => ((h - oh) / 2, (w - ow) / 2),
        };
        let mirror = self.mirror && train && rng.gen_bool(0.5);
        Placement { h_off, w_off, mirror }
    }

    /// Transforms one C×H×W image into `out` (of `output_shape`'s size),
    /// placed as [`TransformConf::place`] draws it.
    #[allow(clippy::too_many_arguments)]
    pub fn apply(&self, x: Pixels<'_>, c: usize, h: usize, w: usize, train: bool, rng: &mut impl Rng, out: &mut [f32]) {
        let at = self.place(c, h, w, train, rng);
        self.apply_at(x, c, h, w, at, out);
    }

    /// Per channel, what is subtracted from every pixel when the mean is
    /// not an image (0 without a mean).
    pub fn channel_means(&self, c: usize) -> Vec<f32> {
        (0..c)
            .map(|ch| match &self.mean {
                Mean::Values(v) if v.len() == 1 => v[0],
                Mean::Values(v) => v[ch],
                _ => 0.0,
            })
            .collect()
    }

    /// Transforms one C×H×W image into `out` with its crop window at `at`.
    pub fn apply_at(&self, x: Pixels<'_>, c: usize, h: usize, w: usize, at: Placement, out: &mut [f32]) {
        debug_assert_eq!(x.len(), c * h * w);
        let (_, oh, ow) = self.output_shape(c, h, w).unwrap_or((c, h, w));
        let Placement { h_off, w_off, mirror } = at;
        let channel_means = self.channel_means(c);
        for (ch, &channel_mean) in channel_means.iter().enumerate() {
            for y in 0..oh {
                for xw in 0..ow {
                    let src = (ch * h + h_off + y) * w + w_off + xw;
                    let dst = (ch * oh + y) * ow + if mirror { ow - 1 - xw } else { xw };
                    let mean = match &self.mean {
                        Mean::Image { values, .. } => values[src],
                        _ => channel_mean,
                    };
                    out[dst] = (x.get(src) - mean) * self.scale;
                }
            }
        }
    }
}

/// A batch of images as stored (bytes, or floats when any record holds
/// floats), each with its placement, and the labels: what a transform on
/// the GPU starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct RawBatch {
    /// Every stored image's (channels, height, width).
    pub shape: (usize, usize, usize),
    pub pixels: RawPixels,
    pub placements: Vec<Placement>,
    pub labels: Vec<f32>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RawPixels {
    Bytes(Vec<u8>),
    Floats(Vec<f32>),
}

impl RawBatch {
    pub fn new(shape: (usize, usize, usize), images: usize) -> RawBatch {
        RawBatch {
            shape,
            pixels: RawPixels::Bytes(Vec::with_capacity(images * shape.0 * shape.1 * shape.2)),
            placements: Vec::with_capacity(images),
            labels: Vec::with_capacity(images),
        }
    }

    /// Adds one image; a float image turns the batch into floats.
    pub fn push(&mut self, x: Pixels<'_>, at: Placement, label: f32) {
        match (&mut self.pixels, x) {
            (RawPixels::Bytes(v), Pixels::Bytes(b)) => v.extend_from_slice(b),
            (RawPixels::Floats(v), x) => v.extend((0..x.len()).map(|i| x.get(i))),
            (RawPixels::Bytes(v), Pixels::Floats(f)) => {
                let mut floats: Vec<f32> = v.iter().map(|&b| f32::from(b)).collect();
                floats.extend_from_slice(f);
                self.pixels = RawPixels::Floats(floats);
            }
        }
        self.placements.push(at);
        self.labels.push(label);
    }
}

/// One image's crop window (top-left offsets) and mirror flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placement {
    pub h_off: usize,
    pub w_off: usize,
    pub mirror: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// A 2x3x4 image whose value encodes its position: 100·c + 10·h + w.
    fn image() -> Vec<u8> {
        (0..2).flat_map(|c| (0..3).flat_map(move |h| (0..4).map(move |w| (100 * c + 10 * h + w) as u8))).collect()
    }

    #[test]
    fn scale_and_per_channel_means() {
        let conf = TransformConf { scale: 0.5, mean: Mean::Values(vec![1.0, 101.0]), ..TransformConf::default() };
        let mut out = vec![0.0; 24];
        conf.apply(Pixels::Bytes(&image()), 2, 3, 4, true, &mut StdRng::seed_from_u64(1), &mut out);
        assert_eq!(&out[..4], &[-0.5, 0.0, 0.5, 1.0]);
        assert_eq!(&out[12..16], &[-0.5, 0.0, 0.5, 1.0]);
        let one = TransformConf { mean: Mean::Values(vec![10.0]), ..TransformConf::default() };
        one.apply(Pixels::Floats(&[10.0; 24]), 2, 3, 4, false, &mut StdRng::seed_from_u64(1), &mut out);
        assert!(out.iter().all(|v| *v == 0.0));
    }

    #[test]
    fn centre_crop_in_test_and_mean_image_of_the_uncropped_size() {
        let values: Vec<f32> = image().iter().map(|v| f32::from(*v)).collect();
        let mean = Mean::Image { channels: 2, height: 3, width: 4, values };
        let conf = TransformConf { crop_size: 2, mean, ..TransformConf::default() };
        assert_eq!(conf.output_shape(2, 3, 4), Ok((2, 2, 2)));
        let mut out = vec![1.0; 8];
        conf.apply(Pixels::Bytes(&image()), 2, 3, 4, false, &mut StdRng::seed_from_u64(1), &mut out);
        assert!(out.iter().all(|v| *v == 0.0), "the mean is indexed at the crop's pixels");
        let plain = TransformConf { crop_size: 2, ..TransformConf::default() };
        plain.apply(Pixels::Bytes(&image()), 2, 3, 4, false, &mut StdRng::seed_from_u64(1), &mut out);
        // Offsets ((3−2)/2, (4−2)/2) = (0, 1).
        assert_eq!(out, vec![1.0, 2.0, 11.0, 12.0, 101.0, 102.0, 111.0, 112.0]);
    }

    #[test]
    fn random_crops_and_mirrors_in_train_only() {
        let conf = TransformConf { crop_size: 2, mirror: true, ..TransformConf::default() };
        let mut rng = StdRng::seed_from_u64(3);
        let (mut corners, mut mirrored) = (std::collections::HashSet::new(), 0);
        let mut out = vec![0.0; 8];
        for _ in 0..200 {
            conf.apply(Pixels::Bytes(&image()), 2, 3, 4, true, &mut rng, &mut out);
            // Rows stay rows; a mirrored crop reads right to left.
            let (a, b) = (out[0], out[1]);
            assert_eq!((a - b).abs(), 1.0);
            if a > b {
                mirrored += 1;
            }
            corners.insert(a.min(b) as u32);
            assert_eq!(out[4] - out[0], 100.0, "channels move together");
        }
        // Every offset: rows 0..=1, columns 0..=2.
        assert_eq!(corners.len(), 6, "{corners:?}");
        assert!((60..140).contains(&mirrored), "{mirrored} of 200 mirrored");
        let mut test = vec![0.0; 8];
        conf.apply(Pixels::Bytes(&image()), 2, 3, 4, false, &mut rng, &mut test);
        assert_eq!(&test[..2], &[1.0, 2.0], "TEST neither mirrors nor moves the crop");
    }

    #[test]
    fn bad_settings_say_what_to_fix() {
        let big = TransformConf { crop_size: 5, ..TransformConf::default() };
        assert!(big.output_shape(1, 4, 4).unwrap_err().contains("crop_size 5"));
        let means = TransformConf { mean: Mean::Values(vec![1.0, 2.0]), ..TransformConf::default() };
        assert!(means.output_shape(3, 4, 4).unwrap_err().contains("one per channel"));
        let image = TransformConf {
            mean: Mean::Image { channels: 1, height: 2, width: 2, values: vec![0.0; 4] },
            ..TransformConf::default()
        };
        assert!(image.output_shape(1, 4, 4).unwrap_err().contains("compute-image-mean"));
    }
}

//! Caffe's data tools: `convert_mnist_data` (IDX images and labels, raw or
//! gzipped, to an LMDB of Datums), `convert_imageset` (a list of image
//! files with labels, optionally resized, shuffled or grey, to an LMDB). Keys are
//! Caffe's: `%08d` for MNIST, `%08d_<file>` for image sets. It owns these
//! conversions; it must never train or transform for training.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::data::datum::{from_picture, Image, Values};
use crate::data::image_list::read_list;
use crate::data::lmdb::LmdbWriter;
use crate::data::read_idx;
use crate::error::{Error, Result};

/// Converts IDX `images` and `labels` files into the LMDB `out`; returns the record count.
pub fn convert_mnist(images: &Path, labels: &Path, out: &Path) -> Result<usize> {
    let (idims, pixels) = read_idx(images, 3)?;
    let (ldims, label_bytes) = read_idx(labels, 1)?;
    if idims[0] != ldims[0] {
        return Err(Error::file(
            images,
            format!("{} images but {} labels in {}", idims[0], ldims[0], labels.display()),
        ));
    }
    let (h, w) = (idims[1], idims[2]);
    let mut db = LmdbWriter::create(out)?;
    for (i, (img, &label)) in pixels.chunks_exact(h * w).zip(&label_bytes).enumerate() {
        let record =
            Image { channels: 1, height: h, width: w, values: Values::Bytes(img.to_vec()), label: label.into() };
        db.put(format!("{i:08}").as_bytes(), &record.to_datum_bytes())?;
    }
    db.finish()
}

/// `convert_imageset`'s flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagesetOptions {
    /// Resize to height × width when both are above 0 (bilinear, as Caffe's OpenCV default).
    pub resize_height: u32,
    pub resize_width: u32,
    /// Shuffle the list (with `seed`) before writing.
    pub shuffle: bool,
    pub seed: u64,
    /// One grey channel instead of BGR.
    pub gray: bool,
}

/// Converts the images listed in `list` (lines `relative/path label`,
/// paths under `root`) into the LMDB `out`; returns the record count.
pub fn convert_imageset(root: &Path, list: &Path, out: &Path, opts: &ImagesetOptions) -> Result<usize> {
    let mut lines = read_list(list)?;
    if opts.shuffle {
        lines.shuffle(&mut StdRng::seed_from_u64(opts.seed));
    }
    let mut db = LmdbWriter::create(out)?;
    for (i, (n, file, label)) in lines.iter().enumerate() {
        let path: PathBuf = root.join(file);
        let at = |msg: String| Error::file(list, format!("line {n}: {}: {msg}", path.display()));
        let mut pic = image::open(&path).map_err(|e| at(format!("cannot read the image: {e}")))?;
        if opts.resize_height > 0 && opts.resize_width > 0 {
            pic = pic.resize_exact(opts.resize_width, opts.resize_height, image::imageops::FilterType::Triangle);
        }
        let record = from_picture(pic, opts.gray, *label);
        db.put(format!("{i:08}_{file}").as_bytes(), &record.to_datum_bytes())?;
    }
    db.finish()
}

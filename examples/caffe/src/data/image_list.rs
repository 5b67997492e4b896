//! The `ImageData` layer's source: a list file of `path label` lines (paths
//! under `root_folder`), images decoded from PNG, JPEG or BMP by the
//! `image` crate when a batch needs them, resized to `new_height` x
//! `new_width` when both are set, kept in colour (BGR, as Caffe's OpenCV
//! reads them) or made grey (`is_color: false`), and shuffled once when
//! asked. Which images a worker takes is `data::Cursor`'s job; this module
//! owns reading the list and decoding, and must never decide the order.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::data::datum::{from_picture, Image, Values};
use crate::data::label_limit::LabelLimit;
use crate::data::pixel_source::PixelSource;
use crate::data::transform::{Pixels, TransformConf};
use crate::error::{Error, Result};
use crate::proto::layer_conf::ImageListConf;

/// The seed of `shuffle: true`'s one shuffle of the list.
const SHUFFLE_SEED: u64 = 1701;

/// One line of a list: its line number, file as written and label.
pub type ListEntry = (usize, String, i32);

/// Reads `path label` lines (Caffe splits at the last space, so file names
/// may hold spaces); blank lines are skipped.
pub fn read_list(list: &Path) -> Result<Vec<ListEntry>> {
    let text = std::fs::read_to_string(list).map_err(|e| Error::file(list, format!("cannot read the list: {e}")))?;
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = line.trim_end();
        let parsed = line.rsplit_once(' ').and_then(|(f, l)| Some((f.to_string(), l.trim().parse::<i32>().ok()?)));
        let Some((file, label)) = parsed else {
            return Err(Error::file(list, format!("line {}: expected `path label`, got `{line}`", n + 1)));
        };
        entries.push((n + 1, file, label));
    }
    if entries.is_empty() {
        return Err(Error::file(list, "lists no image"));
    }
    Ok(entries)
}

#[derive(Debug)]
pub struct ImageList {
    pub list: PathBuf,
    conf: ImageListConf,
    /// `root_folder` resolved: as written, else beside the net file.
    root: PathBuf,
    entries: Vec<ListEntry>,
    /// Every image's (channels, height, width), from the first one.
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl ImageList {
    /// Reads the list and decodes its first image for the size of all; a
    /// relative `root_folder` is taken from the current directory, else
    /// from `base_dir` (the net file's).
    pub fn open(list: &Path, conf: &ImageListConf, base_dir: &Path) -> Result<ImageList> {
        let mut entries = read_list(list)?;
        if conf.shuffle {
            entries.shuffle(&mut StdRng::seed_from_u64(SHUFFLE_SEED));
        }
        if (conf.new_height == 0) != (conf.new_width == 0) {
            return Err(Error::file(list, "set both new_height and new_width (or neither) in image_data_param"));
        }
        let written = Path::new(&conf.root_folder);
        let root = if conf.root_folder.is_empty() || written.is_absolute() || written.is_dir() {
            written.to_path_buf()
        } else {
            base_dir.join(written)
        };
        let mut me =
            ImageList { list: list.to_path_buf(), conf: conf.clone(), root, entries, channels: 0, height: 0, width: 0 };
        let first = me.decode(0)?;
        (me.channels, me.height, me.width) = (first.channels, first.height, first.width);
        Ok(me)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The (channels, height, width) a batch image has after `t`.
    pub fn output_shape(&self, t: &TransformConf) -> Result<(usize, usize, usize)> {
        t.output_shape(self.channels, self.height, self.width).map_err(|e| Error::file(&self.list, e))
    }

    /// Image `i` of the list, decoded, resized and coloured as asked.
    fn decode(&self, i: usize) -> Result<Image> {
        let (n, file, label) = &self.entries[i];
        let path = self.root.join(file);
        let at = |msg: String| Error::file(&self.list, format!("line {n}: {}: {msg}", path.display()));
        let mut pic = image::open(&path).map_err(|e| at(format!("cannot read the image (PNG, JPEG or BMP): {e}")))?;
        if self.conf.new_height > 0 {
            pic = pic.resize_exact(self.conf.new_width, self.conf.new_height, image::imageops::FilterType::Triangle);
        }
        let img = from_picture(pic, !self.conf.is_color, *label);
        if self.channels > 0 && (img.channels, img.height, img.width) != (self.channels, self.height, self.width) {
            return Err(at(format!(
                "is {}x{}x{} but the list's first image is {}x{}x{}; set new_height and new_width in \
                 image_data_param so every image has one size",
                img.channels, img.height, img.width, self.channels, self.height, self.width
            )));
        }
        Ok(img)
    }

    /// Decodes images `indices` in order and hands each (position, pixels,
    /// label) to `each`, after checking its label against `limit`.
    fn for_each(
        &self,
        indices: &[usize],
        limit: Option<&LabelLimit>,
        mut each: impl FnMut(usize, Pixels<'_>, f32),
    ) -> Result<()> {
        for (k, &i) in indices.iter().enumerate() {
            let img = self.decode(i)?;
            if let Some(lim) = limit {
                if img.label < 0 || img.label as usize >= lim.classes {
                    return Err(Error::file(
                        &self.list,
                        format!(
                            "line {} has label {} but layer `{}` scores only {} classes; raise its num_output",
                            self.entries[i].0, img.label, lim.layer, lim.classes
                        ),
                    ));
                }
            }
            let Values::Bytes(bytes) = &img.values else {
                return Err(Error::file(&self.list, "a decoded image holds floats; expected bytes"));
            };
            each(k, Pixels::Bytes(bytes), img.label as f32);
        }
        Ok(())
    }
}

impl PixelSource for ImageList {
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

//! Training and test images for the `Data` layer: an LMDB of Datums (a
//! directory), or IDX files (the MNIST and Fashion-MNIST format, gzipped or
//! not) named by a path prefix; for `ImageData`, a list of image files; for
//! `HDF5Data`, a list of .h5 files; each worker's slice of them, and filling a
//! batch through Caffe's transform. It owns which source a path is and
//! which image comes next; it must never know about layers or geeps.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flate2::read::GzDecoder;

use super::hdf5_data::Hdf5Data;
use super::image_list::ImageList;
use super::label_limit::LabelLimit;
use super::lmdb_data::LmdbData;
use super::memory_data::MemoryData;
use crate::data::pixel_source::PixelSource;
use crate::data::transform::{Pixels, RawBatch, TransformConf};
use crate::error::{Error, Result};
use crate::proto::layer_conf::{Hdf5Conf, ImageListConf};
use crate::proto::net::DataConf;

/// Images (one channel, row-major bytes) with their labels.
#[derive(Debug)]
pub struct Dataset {
    pub pixels: Vec<u8>,
    pub labels: Vec<u8>,
    pub height: usize,
    pub width: usize,
    /// The prefix the files were found under.
    pub source: PathBuf,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn image_len(&self) -> usize {
        self.height * self.width
    }

    /// Highest label + 1.
    pub fn classes(&self) -> usize {
        self.labels.iter().copied().max().map_or(0, |m| m as usize + 1)
    }

    /// Loads `P-images-idx3-ubyte[.gz]` and `P-labels-idx1-ubyte[.gz]`.
    pub fn load(prefix: &Path) -> Result<Dataset> {
        let images = find(prefix, "images-idx3-ubyte")?;
        let labels = find(prefix, "labels-idx1-ubyte")?;
        let (idims, pixels) = read_idx(&images, 3)?;
        let (ldims, labels_v) = read_idx(&labels, 1)?;
        if idims[0] != ldims[0] {
            return Err(Error::file(
                &images,
                format!("{} images but {} labels in {}", idims[0], ldims[0], labels.display()),
            ));
        }
        if idims[0] == 0 {
            return Err(Error::file(&images, "holds no image"));
        }
        Ok(Dataset { pixels, labels: labels_v, height: idims[1], width: idims[2], source: prefix.to_path_buf() })
    }

    /// Writes images `indices` into `data` (as floats, transformed) and their
    /// labels into `label`.
    pub fn fill(&self, indices: &[usize], scale: f32, mean: f32, data: &mut [f32], label: &mut [f32]) {
        let n = self.image_len();
        for (k, &i) in indices.iter().enumerate() {
            let src = &self.pixels[i * n..(i + 1) * n];
            for (d, &p) in data[k * n..(k + 1) * n].iter_mut().zip(src) {
                *d = (f32::from(p) - mean) * scale;
            }
            label[k] = f32::from(self.labels[i]);
        }
    }
}

/// A Data layer's records.
#[derive(Debug)]
pub enum Source {
    /// IDX images and labels, held in memory.
    Idx(Dataset),
    /// An LMDB of Datums, read batch by batch.
    Lmdb(LmdbData),
    /// Image files named in a list (ImageData), decoded batch by batch.
    Images(ImageList),
    /// Datasets of .h5 files named in a list (HDF5Data), held in memory.
    Hdf5(Hdf5Data),
    /// Arrays fed by the library's caller (MemoryData).
    Memory(MemoryData),
}

impl Source {
    /// A directory is an LMDB (a LevelDB is refused, saying to convert);
    /// anything else is an IDX prefix.
    pub fn open(path: &Path) -> Result<Source> {
        if path.is_dir() {
            Ok(Source::Lmdb(LmdbData::open(path)?))
        } else {
            Ok(Source::Idx(Dataset::load(path)?))
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Source::Idx(d) => d.len(),
            Source::Lmdb(d) => d.len(),
            Source::Images(d) => d.len(),
            Source::Hdf5(d) => d.len(),
            Source::Memory(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Highest label + 1, where known without reading every record (an
    /// LMDB's labels are checked batch by batch instead).
    pub fn classes(&self) -> Option<usize> {
        match self {
            Source::Idx(d) => Some(d.classes()),
            Source::Lmdb(_) | Source::Images(_) | Source::Hdf5(_) | Source::Memory(_) => None,
        }
    }

    /// Where the records come from, for messages.
    pub fn path(&self) -> &Path {
        match self {
            Source::Idx(d) => &d.source,
            Source::Lmdb(d) => d.reader.path(),
            Source::Images(d) => &d.list,
            Source::Hdf5(d) => &d.list,
            Source::Memory(d) => &d.layer,
        }
    }

    /// (channels, height, width) of one image after `t`.
    pub fn image_shape(&self, t: &TransformConf) -> Result<(usize, usize, usize)> {
        match self {
            Source::Idx(d) => t.output_shape(1, d.height, d.width).map_err(|e| Error::file(&d.source, e)),
            Source::Lmdb(d) => d.output_shape(t),
            Source::Images(d) => d.output_shape(t),
            Source::Hdf5(d) => Err(no_images(d)),
            Source::Memory(d) => {
                let (c, h, w) = d.item;
                t.output_shape(c, h, w)
                    .map_err(|e| Error::config(format!("MemoryData layer `{}`: {e}", d.layer.display())))
            }
        }
    }

    /// Records `indices` as stored, each placed by `t` with the draws
    /// [`Source::fill`] makes from `seed`, for a transform on the GPU.
    pub fn raw_batch(
        &self,
        indices: &[usize],
        t: &TransformConf,
        train: bool,
        seed: u64,
        limit: Option<&LabelLimit>,
    ) -> Result<RawBatch> {
        match self {
            Source::Lmdb(d) => d.raw_batch(indices, t, train, seed, limit),
            Source::Images(d) => d.raw_batch(indices, t, train, seed, limit),
            Source::Hdf5(d) => Err(no_images(d)),
            Source::Memory(d) => {
                let (c, h, w) = d.item;
                t.output_shape(c, h, w)
                    .map_err(|e| Error::config(format!("MemoryData layer `{}`: {e}", d.layer.display())))?;
                let mut rng: rand::rngs::StdRng = rand::SeedableRng::seed_from_u64(seed);
                let mut batch = RawBatch::new(d.item, indices.len());
                for &i in indices {
                    let at = t.place(c, h, w, train, &mut rng);
                    batch.push(Pixels::Floats(d.item(i)), at, d.labels[i]);
                }
                Ok(batch)
            }
            Source::Idx(d) => {
                self.image_shape(t)?;
                let shape = (1, d.height, d.width);
                let n = d.image_len();
                let mut rng: rand::rngs::StdRng = rand::SeedableRng::seed_from_u64(seed);
                let mut batch = RawBatch::new(shape, indices.len());
                for &i in indices {
                    let at = t.place(1, d.height, d.width, train, &mut rng);
                    batch.push(Pixels::Bytes(&d.pixels[i * n..(i + 1) * n]), at, f32::from(d.labels[i]));
                }
                Ok(batch)
            }
        }
    }

    /// Writes records `indices`, transformed by `t`, into `data` and their
    /// labels into `label`; TRAIN randomness (crops, mirrors) comes from
    /// `seed`. An LMDB's labels are checked against `limit`.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        &self,
        indices: &[usize],
        t: &TransformConf,
        train: bool,
        seed: u64,
        limit: Option<&LabelLimit>,
        data: &mut [f32],
        label: &mut [f32],
    ) -> Result<()> {
        match self {
            Source::Lmdb(d) => d.fill(indices, t, train, seed, limit, data, label),
            Source::Images(d) => d.fill(indices, t, train, seed, limit, data, label),
            // Used as stored: `t` is the identity (HDF5Data refuses transform_param).
            Source::Hdf5(d) => d.fill(indices, limit, &mut [data, label]),
            Source::Memory(d) => {
                let (c, h, w) = d.item;
                let (oc, oh, ow) = self.image_shape(t)?;
                let per = oc * oh * ow;
                let mut rng: rand::rngs::StdRng = rand::SeedableRng::seed_from_u64(seed);
                for (k, &i) in indices.iter().enumerate() {
                    t.apply(Pixels::Floats(d.item(i)), c, h, w, train, &mut rng, &mut data[k * per..(k + 1) * per]);
                    label[k] = d.labels[i];
                }
                Ok(())
            }
            Source::Idx(d) => {
                let (c, h, w) = self.image_shape(t)?;
                let per = c * h * w;
                let n = d.image_len();
                let mut rng = rand::SeedableRng::seed_from_u64(seed);
                let rng: &mut rand::rngs::StdRng = &mut rng;
                for (k, &i) in indices.iter().enumerate() {
                    let px = Pixels::Bytes(&d.pixels[i * n..(i + 1) * n]);
                    t.apply(px, 1, d.height, d.width, train, rng, &mut data[k * per..(k + 1) * per]);
                    label[k] = f32::from(d.labels[i]);
                }
                Ok(())
            }
        }
    }
}

/// An HDF5 source's tops are datasets of any shape, not images to transform.
fn no_images(d: &Hdf5Data) -> Error {
    Error::file(&d.list, "an HDF5Data source holds datasets, not images; its tops are filled as stored")
}

/// The file for `kind`, gzipped or not.
fn find(prefix: &Path, kind: &str) -> Result<PathBuf> {
    let base = format!("{}-{kind}", prefix.display());
    for candidate in [base.clone(), format!("{base}.gz")] {
        if Path::new(&candidate).is_file() {
            return Ok(PathBuf::from(candidate));
        }
    }
    Err(Error::file(
        prefix,
        format!(
            "no data: expected {base} or {base}.gz (data_param.source is a path prefix P with \
             P-images-idx3-ubyte[.gz] and P-labels-idx1-ubyte[.gz])"
        ),
    ))
}

/// Reads an IDX file of unsigned bytes with `rank` dimensions.
pub(crate) fn read_idx(path: &Path, rank: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let file = File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
    let mut bytes = Vec::new();
    let gz = path.extension().is_some_and(|e| e == "gz");
    let read = if gz { GzDecoder::new(file).read_to_end(&mut bytes) } else { { file }.read_to_end(&mut bytes) };
    read.map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    let header = 4 + 4 * rank;
    if bytes.len() < header || bytes[..4] != [0, 0, 0x08, rank as u8] {
        return Err(Error::file(path, format!("not an IDX file of unsigned bytes with {rank} dimension(s)")));
    }
    let dims: Vec<usize> =
        bytes[4..header].chunks_exact(4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize).collect();
    let len: usize = dims.iter().product();
    if bytes.len() - header != len {
        return Err(Error::file(
            path,
            format!("dimensions {dims:?} need {len} bytes of data, the file has {}", bytes.len() - header),
        ));
    }
    bytes.drain(..header);
    Ok((dims, bytes))
}

/// A source's path, with how an ImageData or HDF5Data layer reads it.
type SourceKey = (PathBuf, Option<ImageListConf>, Option<Hdf5Conf>);

/// Datasets already loaded by this process, shared by its workers, and
/// the arrays fed to MemoryData layers.
#[derive(Default, Clone)]
pub struct DataCache {
    loaded: Arc<Mutex<HashMap<SourceKey, Arc<Source>>>>,
    /// Per MemoryData layer name: its data and labels, as fed.
    fed: Arc<Mutex<HashMap<String, Arc<Fed>>>>,
}

/// A MemoryData layer's arrays as fed: data, labels.
type Fed = (Vec<f32>, Vec<f32>);

impl std::fmt::Debug for DataCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fed: Vec<String> = self.fed.lock().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        f.debug_struct("DataCache").field("memory_data_fed", &fed).finish_non_exhaustive()
    }
}

/// How a library caller feeds a MemoryData layer, for messages.
pub const FEED_CALL: &str = "caffe_geeps::data::DataCache::feed_memory_data (passed to training as TrainOptions::data)";

impl DataCache {
    /// Hands the MemoryData layer named `layer` its arrays, as Caffe's
    /// `MemoryDataLayer::Reset` (pycaffe's `set_input_arrays`) does: `data`
    /// holds N items of channels × height × width values (the layer's
    /// `memory_data_param`), `labels` their N labels, N a multiple of its
    /// batch_size; batches take them in order, wrapping around. Checked
    /// against the layer when a net is built; feeding a name again replaces
    /// the arrays for nets built afterwards.
    pub fn feed_memory_data(&self, layer: &str, data: Vec<f32>, labels: Vec<f32>) -> Result<()> {
        let mut fed = self.fed.lock().map_err(|_| Error::config("a worker panicked while loading data"))?;
        fed.insert(layer.to_string(), Arc::new((data, labels)));
        Ok(())
    }

    /// The dataset a Data layer names, loaded once per process.
    pub fn get(&self, conf: &DataConf) -> Result<Arc<Source>> {
        if conf.memory.is_some() {
            let fed = self.fed.lock().map_err(|_| Error::config("a worker panicked while loading data"))?;
            let Some(arrays) = fed.get(&conf.source) else {
                return Err(Error::config(format!(
                    "MemoryData layer `{}` was never fed: its batches are arrays handed over through {FEED_CALL}; \
                     the command line cannot feed it (use Data, ImageData, HDF5Data or DummyData there)",
                    conf.source
                )));
            };
            return Ok(Arc::new(Source::Memory(MemoryData::new(conf, &arrays.0, &arrays.1)?)));
        }
        let prefix = resolve_source(conf);
        // An ImageData or HDF5Data list is a file of its own; a Data source is an LMDB or IDX files.
        if conf.hdf5.is_some() && !prefix.is_file() {
            return Err(list_not_found(conf));
        }
        if conf.images.is_none()
            && conf.hdf5.is_none()
            && !prefix.is_dir()
            && find(&prefix, "labels-idx1-ubyte").is_err()
            && find(&prefix, "images-idx3-ubyte").is_err()
        {
            return Err(not_found(conf));
        }
        let key = (prefix.clone(), conf.images.clone(), conf.hdf5.clone());
        let mut loaded = self.loaded.lock().map_err(|_| Error::config("a worker panicked while loading data"))?;
        if let Some(d) = loaded.get(&key) {
            return Ok(d.clone());
        }
        let d = Arc::new(match (&conf.images, &conf.hdf5) {
            (Some(images), _) => Source::Images(ImageList::open(&prefix, images, &conf.base_dir)?),
            (None, Some(h5)) => Source::Hdf5(Hdf5Data::open(&prefix, h5, &conf.base_dir)?),
            (None, None) => Source::open(&prefix)?,
        });
        loaded.insert(key, d.clone());
        Ok(d)
    }
}

/// A `data_param.source` found nowhere: what was looked for, and where.
fn not_found(conf: &DataConf) -> Error {
    let direct = Path::new(&conf.source);
    let mut places = vec![direct.display().to_string()];
    if !direct.is_absolute() {
        places.push(conf.base_dir.join(direct).display().to_string());
    }
    Error::file(
        direct,
        format!(
            "data_param.source not found: looked for an LMDB folder (as `caffe-geeps convert` or Caffe's convert_imageset \
             writes) or MNIST-style IDX files (SOURCE-images-idx3-ubyte[.gz] with SOURCE-labels-idx1-ubyte[.gz]) at {}",
            places.join(" and at ")
        ),
    )
}

/// An `hdf5_data_param.source` list found nowhere.
fn list_not_found(conf: &DataConf) -> Error {
    let direct = Path::new(&conf.source);
    let mut places = vec![direct.display().to_string()];
    if !direct.is_absolute() && conf.base_dir.join(direct) != direct {
        places.push(conf.base_dir.join(direct).display().to_string());
    }
    Error::file(
        direct,
        format!(
            "hdf5_data_param.source not found: looked for the list of .h5 files (one path a line) at {}",
            places.join(" and at ")
        ),
    )
}

/// The source prefix against the current directory, else the net file's.
pub fn resolve_source(conf: &DataConf) -> PathBuf {
    let direct = Path::new(&conf.source);
    let exists = |p: &Path| {
        if conf.images.is_some() || conf.hdf5.is_some() {
            p.is_file()
        } else {
            p.is_dir() || find(p, "labels-idx1-ubyte").is_ok()
        }
    };
    if direct.is_absolute() || exists(direct) {
        return direct.to_path_buf();
    }
    let beside = conf.base_dir.join(direct);
    if exists(&beside) {
        beside
    } else {
        // Not found either way: the error names the path as written.
        direct.to_path_buf()
    }
}

/// Which images a worker takes next: its rank-strided slice, in file order,
/// wrapping around (Caffe reads its database sequentially).
#[derive(Debug, Clone)]
pub struct Cursor {
    slice: Vec<usize>,
    next: usize,
}

impl Cursor {
    /// Worker `rank` of `world` over `len` images.
    pub fn new(len: usize, rank: usize, world: usize) -> Result<Cursor> {
        let slice: Vec<usize> = (rank..len).step_by(world.max(1)).collect();
        if slice.is_empty() {
            return Err(Error::config(format!("{len} images cannot give each of {world} workers one image")));
        }
        Ok(Cursor { slice, next: 0 })
    }

    /// The next `n` image indices.
    pub fn take(&mut self, n: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.slice[self.next]);
            self.next = (self.next + 1) % self.slice.len();
        }
        out
    }

    /// Moves on by `n` images, as `take` would.
    pub fn skip(&mut self, n: u64) {
        self.next = ((self.next as u64 + n) % self.slice.len() as u64) as usize;
    }

    /// Images in this worker's slice.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_split_and_wrap() {
        let mut a = Cursor::new(5, 0, 2).unwrap();
        let mut b = Cursor::new(5, 1, 2).unwrap();
        assert_eq!(a.take(4), vec![0, 2, 4, 0]);
        assert_eq!(b.take(3), vec![1, 3, 1]);
        assert!(Cursor::new(1, 1, 2).is_err());
    }
}

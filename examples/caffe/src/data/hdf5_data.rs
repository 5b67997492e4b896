//! The `HDF5Data` layer's source: a list file of `.h5` paths (one a line),
//! each file holding one dataset per top (first dimension: the items; the
//! rest: an item's shape), every numeric type read as f32 (as Caffe's
//! `hdf5_load_nd_dataset` converts). Files are read in list order and
//! wrap around; `shuffle` shuffles the file order and the rows within each
//! file once, with a fixed seed (Caffe reshuffles every epoch). Every file
//! is read whole when the source opens, so the total must fit in memory
//! (Caffe holds one file at a time). Which rows a worker takes is
//! `data::Cursor`'s job; this module owns reading and checking the files
//! and copying rows out, and must never decide the order of the cursor.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::data::label_limit::LabelLimit;
use crate::error::{Error, Result};
use crate::hdf5::H5File;
use crate::proto::layer_conf::Hdf5Conf;

/// The seed of `shuffle: true`'s one shuffle of files and rows.
const SHUFFLE_SEED: u64 = 1701;

/// One top's dataset, every file's rows concatenated in reading order.
#[derive(Debug)]
struct Column {
    name: String,
    /// One item's shape (the dataset's dimensions after the first).
    item: Vec<usize>,
    values: Vec<f32>,
}

impl Column {
    fn item_len(&self) -> usize {
        self.item.iter().product()
    }
}

#[derive(Debug)]
pub struct Hdf5Data {
    pub list: PathBuf,
    columns: Vec<Column>,
    /// Per row in reading order: its file and row there, for messages.
    origin: Vec<(usize, usize)>,
    files: Vec<PathBuf>,
}

/// The `.h5` paths a list names, in its order: a relative path
/// is tried against the current directory, then `base_dir` (the net file's).
fn read_list(list: &Path, base_dir: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(list).map_err(|e| Error::file(list, format!("cannot read the list: {e}")))?;
    let mut files = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let written = line.trim();
        if written.is_empty() {
            continue;
        }
        let direct = Path::new(written);
        let beside = base_dir.join(direct);
        let path = if direct.is_absolute() || direct.is_file() {
            direct.to_path_buf()
        } else if beside.is_file() {
            beside
        } else {
            let places = if direct.is_absolute() || beside == direct {
                direct.display().to_string()
            } else {
                format!("{} and at {}", direct.display(), beside.display())
            };
            return Err(Error::file(list, format!("line {}: no HDF5 file `{written}` (looked at {places})", n + 1)));
        };
        files.push(path);
    }
    if files.is_empty() {
        return Err(Error::file(list, "lists no .h5 file; write one path a line"));
    }
    Ok(files)
}

impl Hdf5Data {
    /// Reads every file `list` names, one dataset per `conf.datasets`
    /// entry, checking that each file's datasets have one first dimension
    /// and that every file's items have the first file's shapes.
    pub fn open(list: &Path, conf: &Hdf5Conf, base_dir: &Path) -> Result<Hdf5Data> {
        // Without the library nothing else can be said about the files.
        crate::hdf5::available().map_err(|why| Error::file(list, format!("HDF5Data needs HDF5: {why}")))?;
        let mut files = read_list(list, base_dir)?;
        let mut rng = StdRng::seed_from_u64(SHUFFLE_SEED);
        if conf.shuffle {
            files.shuffle(&mut rng);
        }
        let mut columns: Vec<Column> =
            conf.datasets.iter().map(|d| Column { name: d.clone(), item: Vec::new(), values: Vec::new() }).collect();
        let mut origin = Vec::new();
        for (fi, path) in files.iter().enumerate() {
            let f = H5File::open(path).map_err(|e| Error::file(list, e))?;
            let mut rows: Option<(usize, &str)> = None;
            let mut read = Vec::with_capacity(columns.len());
            for col in &columns {
                let at = |m: String| Error::file(path, format!("dataset `{}`: {m}", col.name));
                let (shape, values) = f.read_floats("", &col.name).map_err(|e| Error::file(list, e))?;
                let Some((&n, item)) = shape.split_first() else {
                    return Err(at("is a scalar; it needs a first dimension of items".into()));
                };
                if n == 0 {
                    return Err(at("holds no item (its first dimension is 0)".into()));
                }
                match rows {
                    None => rows = Some((n, &col.name)),
                    Some((m, first)) if m != n => {
                        return Err(at(format!(
                            "has {n} items but dataset `{first}` has {m}; every top's dataset needs one item per row"
                        )))
                    }
                    Some(_) => {}
                }
                if fi > 0 && col.item != item {
                    return Err(at(format!(
                        "items of shape {item:?}, but {}'s are {:?}; every file's items need one shape",
                        files[0].display(),
                        col.item
                    )));
                }
                read.push((item.to_vec(), values));
            }
            let n = rows.map_or(0, |(n, _)| n);
            let mut order: Vec<usize> = (0..n).collect();
            if conf.shuffle {
                order.shuffle(&mut rng);
            }
            for (col, (item, values)) in columns.iter_mut().zip(read) {
                let len: usize = item.iter().product();
                col.item = item;
                col.values.reserve(n * len);
                for &r in &order {
                    col.values.extend_from_slice(&values[r * len..(r + 1) * len]);
                }
            }
            origin.extend(order.iter().map(|&r| (fi, r)));
        }
        Ok(Hdf5Data { list: list.to_path_buf(), columns, origin, files })
    }

    /// Rows over all files.
    pub fn len(&self) -> usize {
        self.origin.len()
    }

    pub fn is_empty(&self) -> bool {
        self.origin.is_empty()
    }

    /// Each top's shape for a batch of `batch` items.
    pub fn top_shapes(&self, batch: usize) -> Vec<Vec<usize>> {
        self.columns.iter().map(|c| std::iter::once(batch).chain(c.item.iter().copied()).collect()).collect()
    }

    /// Where top `k` comes from, for messages about its consumers.
    pub fn describe(&self, k: usize) -> String {
        let c = &self.columns[k];
        format!("dataset `{}` of {} (items of shape {:?})", c.name, self.files[0].display(), c.item)
    }

    /// Copies rows `indices` into the tops, in top order (a top past
    /// `tops.len()` is not written). The second top's values, where it is
    /// a label (one value an item), are checked against `limit`.
    pub fn fill(&self, indices: &[usize], limit: Option<&LabelLimit>, tops: &mut [&mut [f32]]) -> Result<()> {
        for (t, (col, top)) in self.columns.iter().zip(tops.iter_mut()).enumerate() {
            let len = col.item_len();
            if top.len() < indices.len() * len {
                return Err(Error::file(
                    &self.list,
                    format!("top `{}` holds {} values, a batch needs {}", col.name, top.len(), indices.len() * len),
                ));
            }
            for (k, &i) in indices.iter().enumerate() {
                let row = &col.values[i * len..(i + 1) * len];
                if let (1, 1, Some(lim)) = (t, len, limit) {
                    let v = row[0];
                    if v < 0.0 || v.fract() != 0.0 || v as usize >= lim.classes {
                        let (f, r) = self.origin[i];
                        return Err(Error::file(
                            &self.files[f],
                            format!(
                                "dataset `{}` row {r} has label {v} but layer `{}` scores {} classes (labels 0 to \
                                 {}); raise its num_output or fix the label",
                                col.name,
                                lim.layer,
                                lim.classes,
                                lim.classes.saturating_sub(1)
                            ),
                        ));
                    }
                }
                top[k * len..(k + 1) * len].copy_from_slice(row);
            }
        }
        Ok(())
    }
}

//! The learnable parameters of a net, layer by layer: which layers have
//! them, their blobs' shapes, lr/decay multipliers, initial values from the
//! fillers, and conversion to and from `.caffemodel` weights (matched by
//! layer name, as Caffe shares weights between its train and test nets).
//! It owns that bookkeeping; it must never know where parameters are stored.

use std::path::Path;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::error::{Error, Result};
use crate::layers::{count, filler};
use crate::net::Net;
use crate::proto::caffemodel::{self, LayerBlobs};
use crate::proto::net::ParamSpec;

/// One parameter blob inside its layer's flat vector.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobSlot {
    pub shape: Vec<usize>,
    pub offset: usize,
    pub len: usize,
    pub spec: ParamSpec,
}

/// A layer with parameters: its index in the net and its blobs, flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerParams {
    pub layer: usize,
    /// Every layer that reads and trains these parameters: `layer` first,
    /// then the layers sharing them by `param { name }`, in net order.
    pub users: Vec<usize>,
    pub name: String,
    pub type_name: &'static str,
    pub blobs: Vec<BlobSlot>,
    pub len: usize,
}

/// The parameter layers of a (train) net, in net order.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamLayout {
    pub layers: Vec<LayerParams>,
}

impl ParamLayout {
    pub fn of(net: &Net) -> ParamLayout {
        let mut layers = Vec::new();
        for (i, l) in net.layers.iter().enumerate() {
            if l.params.is_empty() || l.shares.is_some() {
                continue;
            }
            let mut offset = 0;
            let blobs = l
                .params
                .iter()
                .zip(&l.specs)
                .map(|(p, s)| {
                    let len = count(&p.shape);
                    let slot = BlobSlot { shape: p.shape.clone(), offset, len, spec: *s };
                    offset += len;
                    slot
                })
                .collect();
            let mut users = vec![i];
            users.extend((i + 1..net.layers.len()).filter(|&j| net.layers[j].shares == Some(i)));
            layers.push(LayerParams {
                layer: i,
                users,
                name: l.name.clone(),
                type_name: l.type_name,
                blobs,
                len: offset,
            });
        }
        ParamLayout { layers }
    }

    /// Position in `layers` of the parameters that the layer at net index
    /// `layer` uses (its own, or those it shares).
    pub fn index_of_layer(&self, layer: usize) -> Option<usize> {
        self.layers.iter().position(|p| p.users.contains(&layer))
    }

    /// Whether some layer shares another's parameters.
    pub fn has_sharing(&self) -> bool {
        self.layers.iter().any(|p| p.users.len() > 1)
    }

    /// Total floats.
    pub fn total(&self) -> usize {
        self.layers.iter().map(|l| l.len).sum()
    }

    /// Initial values from the fillers. Every worker draws the same values
    /// from `seed`; only one of them publishes them.
    pub fn initial(&self, net: &Net, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = StdRng::seed_from_u64(seed);
        self.layers
            .iter()
            .map(|lp| {
                let mut v = Vec::with_capacity(lp.len);
                for blob in &net.layers[lp.layer].params {
                    v.extend(filler::fill(&blob.filler, &blob.shape, &mut rng));
                }
                v
            })
            .collect()
    }

    /// Values for each parameter layer from a `.caffemodel`, by layer name;
    /// every layer must be there with the same shapes.
    pub fn from_caffemodel(&self, path: &Path) -> Result<Vec<Vec<f32>>> {
        let (found, missing) = self.fine_tune(path, None)?;
        match missing.first() {
            Some(name) => Err(Error::file(path, format!("has no weights for layer `{name}`"))),
            None => Ok(found),
        }
    }

    /// Fine-tuning, as Caffe's `--weights`: layers found in the `.caffemodel`
    /// (by name, shapes checked) take its values, the others keep
    /// `fillers`' (the net's own initial values). Returns the values and the
    /// names of the layers the file did not have. With `fillers` `None`
    /// every layer must be in the file (missing ones get no values).
    pub fn fine_tune(&self, path: &Path, fillers: Option<&[Vec<f32>]>) -> Result<(Vec<Vec<f32>>, Vec<String>)> {
        let file = if is_h5(path) {
            let names: Vec<&str> = self.layers.iter().map(|l| l.name.as_str()).collect();
            crate::hdf5::read_caffemodel_h5(path, &names)?
        } else {
            let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("cannot read weights: {e}")))?;
            caffemodel::decode(&bytes).map_err(|e| Error::file(path, format!("not a caffemodel: {e}")))?
        };
        let mut out = Vec::new();
        let mut missing = Vec::new();
        for (p, lp) in self.layers.iter().enumerate() {
            let Some(found) = file.iter().find(|l| l.name == lp.name) else {
                missing.push(lp.name.clone());
                out.push(fillers.and_then(|f| f.get(p)).cloned().unwrap_or_default());
                continue;
            };
            if found.blobs.len() != lp.blobs.len() {
                return Err(Error::file(
                    path,
                    format!(
                        "layer `{}` has {} blobs there, the net needs {}",
                        lp.name,
                        found.blobs.len(),
                        lp.blobs.len()
                    ),
                ));
            }
            let mut v = Vec::with_capacity(lp.len);
            for (k, ((shape, data), slot)) in found.blobs.iter().zip(&lp.blobs).enumerate() {
                // Old files pad shapes with 1s (num, channels, height, width).
                let squeeze = |s: &[usize]| s.iter().copied().filter(|d| *d != 1).collect::<Vec<_>>();
                if squeeze(shape) != squeeze(&slot.shape) || data.len() != slot.len {
                    return Err(Error::file(
                        path,
                        format!(
                            "blob {k} of layer `{}` is {shape:?} with {} values; the net needs {:?}",
                            lp.name,
                            data.len(),
                            slot.shape
                        ),
                    ));
                }
                v.extend_from_slice(data);
            }
            out.push(v);
        }
        Ok((out, missing))
    }

    /// Writes `values` (one vector per parameter layer) as a `.caffemodel`,
    /// or, where `path` ends in `.h5`, in Caffe's HDF5 layout.
    pub fn write_caffemodel(&self, net_name: &str, values: &[Vec<f32>], path: &Path) -> Result<()> {
        let layers: Vec<LayerBlobs> = self
            .layers
            .iter()
            .zip(values)
            .map(|(lp, v)| LayerBlobs {
                name: lp.name.clone(),
                type_name: lp.type_name.to_string(),
                blobs: lp.blobs.iter().map(|s| (s.shape.clone(), v[s.offset..s.offset + s.len].to_vec())).collect(),
            })
            .collect();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, format!("cannot create: {e}")))?;
        }
        // Atomic: a snapshot killed mid-write leaves the previous file whole.
        if is_h5(path) {
            return crate::hdf5::write_caffemodel_h5(path, &layers);
        }
        crate::proto::binary::write_atomic(path, &caffemodel::encode(net_name, &layers))
    }

    /// Per layer of `other` (a net sharing these parameters by layer name,
    /// like the test net), the index into this layout, checked for shape.
    pub fn share_with(&self, other: &Net) -> Result<Vec<Option<usize>>> {
        let mut map: Vec<Option<usize>> = Vec::with_capacity(other.layers.len());
        for l in &other.layers {
            // A sharing layer uses its owner's (an earlier layer's) parameters.
            let found = match l.shares {
                Some(owner) => Ok(map[owner]),
                None => self.own_index(l, other),
            }?;
            map.push(found);
        }
        Ok(map)
    }

    fn own_index(&self, l: &crate::net::NetLayer, other: &Net) -> Result<Option<usize>> {
        std::iter::once(l)
            .map(|l| {
                if l.params.is_empty() {
                    return Ok(None);
                }
                let Some(i) = self.layers.iter().position(|p| p.name == l.name) else {
                    return Err(Error::config(format!(
                        "layer `{}` of the {} net has parameters but no TRAIN layer of that name holds them",
                        l.name,
                        other.phase.name()
                    )));
                };
                let shapes: Vec<_> = l.params.iter().map(|p| &p.shape).collect();
                let ours: Vec<_> = self.layers[i].blobs.iter().map(|b| &b.shape).collect();
                if shapes != ours {
                    return Err(Error::config(format!(
                        "layer `{}` has parameter shapes {shapes:?} in the {} net but {ours:?} in the TRAIN net",
                        l.name,
                        other.phase.name()
                    )));
                }
                Ok(Some(i))
            })
            .next()
            .unwrap_or(Ok(None))
    }
}

/// Whether `path` names an HDF5 file (`.h5`), as Caffe decides for weights and solver states.
pub fn is_h5(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "h5")
}

//! Caffe's weight sharing by `param { name }`, resolved for one phase's net:
//! the first layer naming a blob owns it, a later layer naming the same
//! blob shares it (shapes checked strictly, or by count with
//! `share_mode: PERMISSIVE`; a multiplier written by both must agree, one
//! written only by a sharer becomes the blob's, as Caffe's `AppendParam`).
//! caffe-geeps shares whole layers: a sharing layer names every parameter
//! blob, each the blob at the same index of one earlier layer, and then
//! reads and trains that layer's parameters. It owns these checks and the
//! `shares` mark on each layer; it must never store parameters or compute.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::proto::net::{ParamShare, ParamSpec};

/// What sharing needs of a built layer; `specs` are settled in place and
/// `shares` set for a sharing layer.
pub(crate) struct View {
    pub name: String,
    pub type_name: &'static str,
    pub line: usize,
    pub shapes: Vec<Vec<usize>>,
    pub specs: Vec<ParamSpec>,
    /// Its parameters are running statistics (BatchNorm's), not learned.
    pub statistics: bool,
    pub shares: Option<usize>,
}

/// Where a named blob lives: its owner layer, the blob's index there, and
/// which of its multipliers some `param` block wrote.
struct Owned {
    layer: usize,
    blob: usize,
    lr_set: bool,
    decay_set: bool,
}

/// Marks each sharing layer of `layers` with its owner (`shares`) and
/// settles the owners' multipliers; `names[i]` are layer i's `param`
/// blocks' sharing names. Errors name the file's line and both layers.
pub(crate) fn resolve(layers: &mut [View], names: &[Vec<Option<ParamShare>>], file: &std::path::Path) -> Result<()> {
    let err = |line: usize, msg: String| Error::Prototxt { file: file.to_path_buf(), line, msg };
    let mut owned: HashMap<String, Owned> = HashMap::new();
    for i in 0..layers.len() {
        let named = names.get(i).map(Vec::as_slice).unwrap_or_default();
        if named.iter().all(Option::is_none) {
            continue;
        }
        let mut owner: Option<usize> = None;
        let mut fresh = Vec::new();
        for (k, share) in named.iter().enumerate() {
            let Some(share) = share else { continue };
            if k >= layers[i].shapes.len() {
                // More `param` blocks than blobs is reported by the wiring.
                continue;
            }
            match owned.get(&share.name) {
                None => fresh.push((k, share)),
                Some(o) => {
                    check_shape(layers, o, i, k, share).map_err(|m| err(share.line, m))?;
                    if owner.is_some_and(|x| x != o.layer) || o.blob != k {
                        return Err(err(share.line, whole_layer(&layers[i].name, &share.name, &layers[o.layer].name)));
                    }
                    owner = Some(o.layer);
                }
            }
        }
        let Some(o) = owner else {
            // Owns every blob it names.
            for (k, share) in fresh {
                let blob = Owned { layer: i, blob: k, lr_set: share.lr_set, decay_set: share.decay_set };
                owned.insert(share.name.clone(), blob);
            }
            continue;
        };
        if let Some((_, share)) = fresh.first() {
            return Err(err(share.line, whole_layer(&layers[i].name, &share.name, &layers[o].name)));
        }
        if named.len() < layers[i].shapes.len() || named.iter().any(Option::is_none) {
            return Err(err(
                layers[i].line,
                format!(
                    "layer `{}` shares parameters with layer `{}` but does not name all of its {} parameter blob(s); \
                     give every blob a `param {{ name }}` (the names of `{}`'s blobs, in order)",
                    layers[i].name,
                    layers[o].name,
                    layers[i].shapes.len(),
                    layers[o].name
                ),
            ));
        }
        if layers[i].statistics {
            return Err(err(
                layers[i].line,
                format!(
                    "layer `{}` ({}) shares running statistics, which no solver trains; caffe-geeps shares learned \
                     parameters only: remove its `param {{ name }}`",
                    layers[i].name, layers[i].type_name
                ),
            ));
        }
        settle_multipliers(layers, &mut owned, i, o, named).map_err(|(line, m)| err(line, m))?;
        layers[i].shares = Some(o);
    }
    Ok(())
}

fn whole_layer(layer: &str, blob: &str, owner: &str) -> String {
    format!(
        "layer `{layer}` shares `{blob}` with layer `{owner}` but not as a whole layer; caffe-geeps shares whole \
         layers: name each of `{layer}`'s blobs after the blob at the same position of one earlier layer (or none)"
    )
}

/// Caffe's shape check: equal shapes, or equal counts when permissive.
fn check_shape(layers: &[View], o: &Owned, i: usize, k: usize, share: &ParamShare) -> std::result::Result<(), String> {
    let Some(theirs) = layers[o.layer].shapes.get(o.blob) else { return Ok(()) };
    let ours = &layers[i].shapes[k];
    let count = |s: &[usize]| s.iter().product::<usize>();
    let fits = if share.permissive { count(theirs) == count(ours) } else { theirs == ours };
    if fits {
        return Ok(());
    }
    Err(format!(
        "cannot share param `{}` owned by layer `{}` with layer `{}`: {} mismatch, the owner's blob is {:?} and the \
         sharing layer's {:?}{}",
        share.name,
        layers[o.layer].name,
        layers[i].name,
        if share.permissive { "count" } else { "shape" },
        theirs,
        ours,
        if share.permissive { "" } else { " (`share_mode: PERMISSIVE` checks counts only)" }
    ))
}

/// A multiplier written by the sharer: the owner's if the owner (or an
/// earlier sharer) wrote it too and they agree, else it becomes the blob's.
fn settle_multipliers(
    layers: &mut [View],
    owned: &mut HashMap<String, Owned>,
    i: usize,
    o: usize,
    named: &[Option<ParamShare>],
) -> std::result::Result<(), (usize, String)> {
    for (k, share) in named.iter().enumerate() {
        let Some(share) = share else { continue };
        let Some(entry) = owned.get_mut(&share.name) else { continue };
        let (ours, theirs) = (layers[i].specs[k], layers[o].specs[k]);
        for (what, set, mine, current, owner_set) in [
            ("lr_mult", share.lr_set, ours.lr_mult, theirs.lr_mult, &mut entry.lr_set),
            ("decay_mult", share.decay_set, ours.decay_mult, theirs.decay_mult, &mut entry.decay_set),
        ] {
            if !set {
                continue;
            }
            if *owner_set && mine != current {
                return Err((
                    share.line,
                    format!(
                        "shared param `{}` has mismatched {what}: {current} in layer `{}`, {mine} in layer `{}`; write one value",
                        share.name, layers[o].name, layers[i].name
                    ),
                ));
            }
            *owner_set = true;
            if what == "lr_mult" {
                layers[o].specs[k].lr_mult = mine;
            } else {
                layers[o].specs[k].decay_mult = mine;
            }
        }
        layers[i].specs[k] = layers[o].specs[k];
    }
    Ok(())
}

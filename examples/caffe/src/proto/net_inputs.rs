//! Caffe's legacy net inputs: the net-level `input`, `input_dim` and
//! `input_shape` fields of old deploy files (AlexNet, ResNet, MobileNet),
//! upgraded on load into one `Input` layer named `input` placed first, as
//! Caffe's `UpgradeNetInput` does. It owns that upgrade and its checks; it
//! must never build or run a layer.

use crate::proto::caffe;
use crate::proto::layer_spec::LayerSpec;
use crate::proto::locate::Loc;
use crate::proto::net_param::{LayerKind, LayerParam, PhaseRules};
use crate::proto::problems::Problems;

/// The `Input` layer the legacy fields declare, or `None` when the net sets
/// none of them (or they are wrong: the problems are in `p`).
pub fn upgrade(msg: &caffe::NetParameter, loc: &Loc<'_>, p: &mut Problems) -> Option<LayerParam> {
    let names = &msg.input;
    let (dims, shapes) = (&msg.input_dim, &msg.input_shape);
    if names.is_empty() {
        for (field, set) in [("input_dim", !dims.is_empty()), ("input_shape", !shapes.is_empty())] {
            if set {
                p.push(
                    loc.of(field),
                    format!("`{field}` gives a shape but no `input` names the blob; add `input: \"data\"`"),
                );
            }
        }
        return None;
    }
    let line = loc.of("input");
    let shapes: Vec<Vec<i64>> = match (dims.is_empty(), shapes.is_empty()) {
        (false, false) => {
            p.push(loc.of("input_dim"), "set either `input_dim` or `input_shape`, not both");
            return None;
        }
        (true, true) => {
            p.push(
                line,
                "`input` names a blob without its shape; add `input_shape { dim: ... }` (or four `input_dim`)",
            );
            return None;
        }
        (false, true) if dims.len() != 4 * names.len() => {
            p.push(
                loc.of("input_dim"),
                format!(
                    "{} `input_dim` for {} `input`: give four (num, channels, height, width) per input",
                    dims.len(),
                    names.len()
                ),
            );
            return None;
        }
        (false, true) => dims.chunks(4).map(|c| c.iter().map(|&d| i64::from(d)).collect()).collect(),
        (true, false) if shapes.len() != names.len() => {
            p.push(
                loc.of("input_shape"),
                format!("{} `input_shape` for {} `input`: give one shape per input", shapes.len(), names.len()),
            );
            return None;
        }
        (true, false) => shapes.iter().map(|s| s.dim.clone()).collect(),
    };
    let before = p.len();
    for (name, shape) in names.iter().zip(&shapes) {
        if shape.is_empty() || shape.iter().any(|&d| d < 1) {
            p.push(line, format!("input `{name}` has shape {shape:?}; every dim must be at least 1"));
        }
    }
    if p.len() != before {
        return None;
    }
    let shapes = shapes.iter().map(|s| s.iter().map(|&d| d as usize).collect()).collect();
    Some(LayerParam {
        name: "input".to_string(),
        kind: LayerKind::Spec(LayerSpec::Input { shapes, tops: names.len() }),
        bottoms: Vec::new(),
        tops: names.clone(),
        params: Vec::new(),
        shares: Vec::new(),
        loss_weight: Vec::new(),
        phases: PhaseRules::default(),
        line,
    })
}

//! Caffe's `NetParameter` (the `*_train_test.prototxt` file) read into the
//! settings this trainer runs: the generated message is checked field by
//! field, every problem of the file collected with its line and what to
//! write instead. It owns the net-level checks and which `*_param` each
//! layer type may set; reading each type's settings (with Caffe's defaults)
//! is `layer_params`'s. It must never check shapes or build anything
//! (`net::wiring` does). A net in Caffe's V1 format (`layers`) is upgraded
//! layer by layer (`v1_upgrade`) and then checked as any other.

use std::path::Path;

use crate::error::{Error, Result};
use crate::proto::caffe;
use crate::proto::layer_params;
use crate::proto::locate::Loc;
use crate::proto::net_inputs;
use crate::proto::problems::Problems;
use crate::proto::standard_params;
use crate::proto::text;
use crate::proto::v1_upgrade;

// The parsed net's types, where callers look for them.
pub use crate::proto::layer_conf::{
    ConvConf, DataConf, Filler, Hdf5Conf, InnerProductConf, Normalization, ParamShare, ParamSpec, PoolConf, PoolMethod,
    PoolRound, VarianceNorm,
};
pub use crate::proto::layer_spec::LayerSpec;
pub use crate::proto::net_param::{LayerKind, LayerParam, NetParam, PhaseRules, LAYER_TYPES};
pub use crate::proto::net_state::{NetState, Phase, StateRule};

/// The `*_param` fields of LayerParameter each layer type reads; any other
/// one set on a layer is a mistake.
const TYPE_PARAMS: &[(&str, &[&str])] = &[
    ("Data", &["data_param", "transform_param"]),
    ("Input", &["input_param"]),
    ("ImageData", &["image_data_param", "transform_param"]),
    // Caffe's HDF5Data refuses transform_param too: its values are used as stored.
    ("HDF5Data", &["hdf5_data_param"]),
    ("DummyData", &["dummy_data_param"]),
    ("MemoryData", &["memory_data_param", "transform_param"]),
    ("AbsVal", &[]),
    ("BNLL", &[]),
    ("Exp", &["exp_param"]),
    ("Log", &["log_param"]),
    ("Threshold", &["threshold_param"]),
    ("ELU", &["elu_param"]),
    ("Silence", &[]),
    ("EuclideanLoss", &["loss_param"]),
    ("SigmoidCrossEntropyLoss", &["loss_param"]),
    ("Convolution", &["convolution_param"]),
    ("Pooling", &["pooling_param"]),
    ("InnerProduct", &["inner_product_param"]),
    ("ReLU", &["relu_param"]),
    ("PReLU", &["prelu_param"]),
    ("Sigmoid", &["sigmoid_param"]),
    ("TanH", &["tanh_param"]),
    ("Power", &["power_param"]),
    ("Dropout", &["dropout_param"]),
    ("LRN", &["lrn_param"]),
    ("BatchNorm", &["batch_norm_param"]),
    ("Scale", &["scale_param"]),
    ("Concat", &["concat_param"]),
    ("Eltwise", &["eltwise_param"]),
    ("Flatten", &["flatten_param"]),
    ("Reshape", &["reshape_param"]),
    ("Softmax", &["softmax_param"]),
    ("SoftmaxWithLoss", &["loss_param", "softmax_param"]),
    ("Accuracy", &["accuracy_param"]),
];

/// The `*_param` fields a layer sets.
fn set_params(lp: &caffe::LayerParameter) -> Vec<&'static str> {
    [
        ("transform_param", lp.transform_param.is_some()),
        ("loss_param", lp.loss_param.is_some()),
        ("accuracy_param", lp.accuracy_param.is_some()),
        ("batch_norm_param", lp.batch_norm_param.is_some()),
        ("concat_param", lp.concat_param.is_some()),
        ("convolution_param", lp.convolution_param.is_some()),
        ("data_param", lp.data_param.is_some()),
        ("dropout_param", lp.dropout_param.is_some()),
        ("dummy_data_param", lp.dummy_data_param.is_some()),
        ("elu_param", lp.elu_param.is_some()),
        ("exp_param", lp.exp_param.is_some()),
        ("log_param", lp.log_param.is_some()),
        ("threshold_param", lp.threshold_param.is_some()),
        ("image_data_param", lp.image_data_param.is_some()),
        ("hdf5_data_param", lp.hdf5_data_param.is_some()),
        ("memory_data_param", lp.memory_data_param.is_some()),
        ("eltwise_param", lp.eltwise_param.is_some()),
        ("flatten_param", lp.flatten_param.is_some()),
        ("inner_product_param", lp.inner_product_param.is_some()),
        ("input_param", lp.input_param.is_some()),
        ("lrn_param", lp.lrn_param.is_some()),
        ("pooling_param", lp.pooling_param.is_some()),
        ("power_param", lp.power_param.is_some()),
        ("prelu_param", lp.prelu_param.is_some()),
        ("relu_param", lp.relu_param.is_some()),
        ("reshape_param", lp.reshape_param.is_some()),
        ("scale_param", lp.scale_param.is_some()),
        ("sigmoid_param", lp.sigmoid_param.is_some()),
        ("softmax_param", lp.softmax_param.is_some()),
        ("tanh_param", lp.tanh_param.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

impl NetParam {
    /// Reads and checks a net prototxt.
    pub fn load(path: &Path) -> Result<NetParam> {
        let src = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read the net: {e}")))?;
        Self::parse(&src, path)
    }

    /// Parses net prototxt text; `path` names it in errors and anchors relative sources.
    pub fn parse(src: &str, path: &Path) -> Result<NetParam> {
        let (msg, locs) = text::parse::<caffe::NetParameter>(src, path, "NetParameter")?;
        Self::from_proto(&msg, &locs.root(), path)
    }

    /// Checks a parsed net (`loc`: where it is written in `path`, for errors).
    pub fn from_proto(msg: &caffe::NetParameter, loc: &Loc<'_>, path: &Path) -> Result<NetParam> {
        let mut p = Problems::new(path);
        for (field, set) in [
            ("force_backward", msg.force_backward.is_some()),
            ("state", msg.state.is_some()),
            ("debug_info", msg.debug_info.is_some()),
        ] {
            if set {
                p.push(
                    loc.of(field),
                    format!("field `{field}` of NetParameter is not supported by caffe-geeps; remove it"),
                );
            }
        }
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        // Caffe upgrades the legacy net inputs into an Input layer placed first.
        let mut layers: Vec<LayerParam> = net_inputs::upgrade(msg, loc, &mut p).into_iter().collect();
        for (i, lp) in msg.layer.iter().enumerate() {
            if let Some(l) = layer(lp, &loc.nth("layer", i), &base_dir, &mut p) {
                layers.push(l);
            }
        }
        // Caffe's V1 `layers`, upgraded as Caffe upgrades them; their fields keep their lines.
        if !msg.layers.is_empty() && !msg.layer.is_empty() {
            p.push(
                loc.nth("layers", 0).line(),
                "the net mixes V1 `layers` with `layer`; write every layer one way (Caffe ignores the `layer` ones)",
            );
        }
        for (i, v1) in msg.layers.iter().enumerate() {
            let at = loc.nth("layers", i);
            if v1.r#type == Some(0) {
                p.push(at.of("type"), format!("V1 layer `{}` has type NONE; give it its type", v1.name()));
                continue;
            }
            if v1.blob_share_mode.len() > v1.param.len() {
                p.push(
                    at.nth("blob_share_mode", v1.param.len()).line(),
                    "`blob_share_mode` applies to a blob that `param` names (one `param: \"name\"` per blob); \
                     name the blob or remove it",
                );
                continue;
            }
            if let Some(l) = layer(&v1_upgrade::upgrade(v1), &at, &base_dir, &mut p) {
                layers.push(l);
            }
        }
        if msg.layer.is_empty() && msg.layers.is_empty() && msg.input.is_empty() {
            p.push(loc.line(), "the net has no `layer`");
        }
        p.finish()?;
        Ok(NetParam { name: msg.name().to_string(), layers, file: path.to_path_buf() })
    }
}

/// One layer; `None` when it has problems (all recorded in `p`).
fn layer(lp: &caffe::LayerParameter, loc: &Loc<'_>, base_dir: &Path, p: &mut Problems) -> Option<LayerParam> {
    let before = p.len();
    let name = lp.name().to_string();
    let line = loc.line();
    let Some(type_name) = lp.r#type.as_deref() else {
        p.push(line, format!("layer `{name}` has no `type`"));
        return None;
    };
    let mut params = Vec::new();
    let mut shares = Vec::new();
    for (i, ps) in lp.param.iter().enumerate() {
        let pl = loc.nth("param", i);
        let share = match ps.name.as_deref() {
            Some("") => {
                p.push(pl.of("name"), "`param { name }` is empty; give the shared blob a name or remove `name`");
                None
            }
            Some(n) => Some(ParamShare {
                name: n.to_string(),
                permissive: ps.share_mode() == caffe::param_spec::DimCheckMode::Permissive,
                lr_set: ps.lr_mult.is_some(),
                decay_set: ps.decay_mult.is_some(),
                line: pl.line(),
            }),
            None if ps.share_mode.is_some() => {
                p.push(
                    pl.of("share_mode"),
                    "`share_mode` applies to a named `param` (one shared by name); add `name` or remove it",
                );
                None
            }
            None => None,
        };
        shares.push(share);
        params.push(ParamSpec { lr_mult: ps.lr_mult(), decay_mult: ps.decay_mult() });
    }
    for (field, set) in [("propagate_down", !lp.propagate_down.is_empty()), ("blobs", !lp.blobs.is_empty())] {
        if set {
            p.push(
                loc.of(field),
                format!("field `{field}` of LayerParameter is not supported by caffe-geeps; remove it"),
            );
        }
    }
    let mut phases = PhaseRules::default();
    if let Some(ph) = lp.phase {
        // A layer-level `phase` is set by Caffe itself; honour it as an include.
        phases.include.push(StateRule { phase: Some(phase(ph)), ..StateRule::default() });
    }
    for (which, rules, list) in
        [("include", &lp.include, &mut phases.include), ("exclude", &lp.exclude, &mut phases.exclude)]
    {
        for (i, r) in rules.iter().enumerate() {
            let rl = loc.nth(which, i);
            if let (Some(lo), Some(hi)) = (r.min_level, r.max_level) {
                if lo > hi {
                    p.push(
                        rl.of("max_level"),
                        format!("max_level {hi} is below min_level {lo}: no net state meets this `{which}` rule"),
                    );
                }
            }
            list.push(StateRule {
                phase: r.phase.map(phase),
                min_level: r.min_level,
                max_level: r.max_level,
                stages: r.stage.clone(),
                not_stages: r.not_stage.clone(),
            });
        }
    }
    let Some(&(_, allowed)) = TYPE_PARAMS.iter().chain(standard_params::TYPE_PARAMS).find(|(t, _)| *t == type_name)
    else {
        p.push(
            loc.of("type"),
            format!("unknown layer type `{type_name}` (layer `{name}`); caffe-geeps runs {}", LAYER_TYPES.join(", ")),
        );
        return None;
    };
    for field in set_params(lp).into_iter().chain(standard_params::set_params(lp)) {
        if !allowed.contains(&field) {
            p.push(loc.of(field), format!("`{field}` does not apply to a {type_name} layer; remove it"));
        }
    }
    let kind = layer_params::kind(type_name, lp, loc, base_dir, p);
    let kind = kind.filter(|_| p.len() == before)?;
    Some(LayerParam {
        name,
        kind,
        bottoms: lp.bottom.clone(),
        tops: lp.top.clone(),
        params,
        shares,
        loss_weight: lp.loss_weight.clone(),
        phases,
        line,
    })
}

fn phase(p: i32) -> Phase {
    if p == caffe::Phase::Train as i32 {
        Phase::Train
    } else {
        Phase::Test
    }
}

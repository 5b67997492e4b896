//! Caffe's V1 net format (`layers { type: CONVOLUTION blobs_lr: 1 ... }`),
//! upgraded on load: BVLC's V1 files read into the same layers as the
//! current-format files of the same nets, and what the upgrade cannot
//! give (a type of NONE, a type caffe-geeps does not run, a V0 layer, V1
//! and current layers mixed, a setting refused in any format) is named at
//! its line. Training the V1 files is `zoo.rs`'s.

mod common;

use std::path::Path;

use caffe_geeps::proto::net::{LayerParam, NetParam};

fn zoo(file: &str) -> NetParam {
    let path = common::models().join("zoo").join(file);
    NetParam::load(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// What a layer means, without where it is written (its lines, the net file's folder).
fn meaning(l: &LayerParam, net: &NetParam) -> String {
    let shares: Vec<_> = l.shares.iter().map(|s| s.as_ref().map(|s| (&s.name, s.permissive))).collect();
    let folder = net.file.parent().unwrap().display().to_string();
    format!(
        "{} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        l.name, l.kind, l.bottoms, l.tops, l.params, shares, l.loss_weight, l.phases
    )
    .replace(&folder, "FOLDER")
}

#[test]
fn bvlc_v1_files_read_as_their_current_format_files() {
    for (v1, current) in [
        ("bvlc_v1/cifar10_quick_train_test.prototxt", "cifar10/cifar10_quick_train_test.prototxt"),
        ("bvlc_v1/cifar10_full_train_test.prototxt", "cifar10/cifar10_full_train_test.prototxt"),
        ("bvlc_v1/mnist_siamese_train_test.prototxt", "mnist_siamese/mnist_siamese_train_test.prototxt"),
    ] {
        let (a, b) = (zoo(v1), zoo(current));
        assert_eq!(a.name, b.name);
        assert_eq!(a.layers.len(), b.layers.len(), "{v1}");
        for (x, y) in a.layers.iter().zip(&b.layers) {
            // The sources differ only in where the data lies (the tests substitute them).
            let (mx, my) = (meaning(x, &a), meaning(y, &b));
            let strip = |m: &str| m.replace("/home/gavin/caffe/", "");
            assert_eq!(strip(&mx), strip(&my), "{v1}: layer `{}`", x.name);
        }
    }
}

#[test]
fn v1_problems_are_named_at_their_line() {
    let cases = [
        // NONE names no type.
        ("layers {\n  name: \"x\"\n  type: NONE\n}\n", 3, "has type NONE"),
        // A type caffe-geeps does not run, by its upgraded name.
        ("layers {\n  name: \"w\"\n  type: WINDOW_DATA\n}\n", 3, "unknown layer type `WindowData`"),
        // A setting refused in the current format is refused here too, at its line.
        (
            "layers {\n  name: \"d\"\n  type: DATA\n  top: \"data\"\n  data_param {\n    source: \"s\"\n    batch_size: 2\n    \
             rand_skip: 4\n  }\n}\n",
            8,
            "field `rand_skip` of DataParameter is not supported",
        ),
        // Settings of another type are not moved, and are refused for the type that has them.
        ("layers {\n  name: \"r\"\n  type: RELU\n  pooling_param {\n    pool: MAX\n  }\n}\n", 4, "`pooling_param` does not apply to a ReLU layer"),
        // A share mode without a name, as the current format refuses it.
        (
            "layers {\n  name: \"ip\"\n  type: INNER_PRODUCT\n  blob_share_mode: PERMISSIVE\n  inner_product_param {\n    \
             num_output: 2\n  }\n}\n",
            4,
            "`blob_share_mode` applies to a blob that `param` names",
        ),
        // V0 layers are not read.
        ("layers {\n  layer {\n    name: \"c\"\n    type: \"conv\"\n  }\n}\n", 2, "V0 format"),
        // V1 and current layers together.
        ("layer {\n  name: \"a\"\n  type: \"ReLU\"\n}\nlayers {\n  name: \"b\"\n  type: RELU\n}\n", 5, "mixes V1 `layers` with `layer`"),
        // A V1 type written as a string.
        ("layers {\n  name: \"c\"\n  type: \"Convolution\"\n}\n", 3, "without quotes (`type: CONVOLUTION`)"),
    ];
    for (src, line, words) in cases {
        let (at, msg) = common::net_err(src);
        assert!(msg.contains(words), "{src}\n-> {at}: {msg}");
        assert_eq!(at, line, "{src}\n-> {msg}");
    }
}

#[test]
fn v1_lists_become_param_blocks_that_share_and_scale() {
    let src = "name: \"n\"\nlayers {\n  name: \"a\"\n  type: INNER_PRODUCT\n  bottom: \"x\"\n  top: \"y\"\n  \
               blobs_lr: 1\n  blobs_lr: 2\n  weight_decay: 1\n  weight_decay: 0\n  param: \"w\"\n  \
               blob_share_mode: PERMISSIVE\n  inner_product_param {\n    num_output: 3\n  }\n}\n";
    let net = NetParam::parse(src, Path::new("v1.prototxt")).unwrap();
    let l = &net.layers[0];
    assert_eq!(
        format!("{:?}", l.params),
        "[ParamSpec { lr_mult: 1.0, decay_mult: 1.0 }, ParamSpec { lr_mult: 2.0, decay_mult: 0.0 }]"
    );
    let share = l.shares[0].as_ref().unwrap();
    assert_eq!((share.name.as_str(), share.permissive, share.line), ("w", true, 11));
    assert!(l.shares[1].is_none());
    assert_eq!(l.line, 2);
}

/// A V1 deploy file (legacy net inputs, V1 layers) takes a V1 weights
/// file: the binary `layers` are upgraded as the text ones are.
#[test]
fn v1_weights_load_into_a_v1_net() {
    use caffe_geeps::data::DataCache;
    use caffe_geeps::net::params::ParamLayout;
    use caffe_geeps::net::Net;
    use caffe_geeps::proto::caffe::v1_layer_parameter::LayerType;
    use caffe_geeps::proto::caffe::{NetParameter, V1LayerParameter};
    use caffe_geeps::proto::caffemodel::blob_proto;
    use caffe_geeps::proto::net::Phase;
    use prost::Message;

    let dir = common::scratch("v1-weights");
    let src = "name: \"tiny\"\ninput: \"data\"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 2\ninput_dim: 2\nlayers {\n  \
               name: \"ip\"\n  type: INNER_PRODUCT\n  bottom: \"data\"\n  top: \"ip\"\n  inner_product_param {\n    \
               num_output: 2\n  }\n}\nlayers {\n  name: \"relu\"\n  type: RELU\n  bottom: \"ip\"\n  top: \"ip\"\n}\n";
    let param = NetParam::parse(src, &dir.join("deploy.prototxt")).unwrap();
    let net = Net::build(&param, Phase::Test, &DataCache::default()).unwrap();
    let layout = ParamLayout::of(&net);
    let (w, b) = ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [0.5, -0.5]);
    let v1 = |name: &str, t: LayerType, blobs| V1LayerParameter {
        name: Some(name.into()),
        r#type: Some(t as i32),
        blobs,
        ..Default::default()
    };
    let weights = NetParameter {
        name: Some("tiny".into()),
        layers: vec![
            v1("ip", LayerType::InnerProduct, vec![blob_proto(&[2, 4], &w), blob_proto(&[2], &b)]),
            v1("relu", LayerType::Relu, vec![]),
        ],
        ..Default::default()
    };
    let path = dir.join("tiny.caffemodel");
    std::fs::write(&path, weights.encode_to_vec()).unwrap();
    let (values, missing) = layout.fine_tune(&path, None).unwrap();
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(values, [[&w[..], &b[..]].concat()]);
    let _ = std::fs::remove_dir_all(&dir);
}

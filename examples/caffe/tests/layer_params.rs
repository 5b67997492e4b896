//! Each layer type's `*_param` as the reader turns it into settings:
//! Caffe's defaults when a field is not written, the written values when it
//! is, and every bad value (a wrong enum name, an out-of-range number, a
//! param on the wrong type) refused at its line with what to write instead.

mod common;

use std::path::Path;

use caffe_geeps::layers::eltwise::EltwiseOp;
use caffe_geeps::layers::lrn::{LrnConf, NormRegion};
use caffe_geeps::layers::power::PowerConf;
use caffe_geeps::layers::scale::ScaleConf;
use caffe_geeps::layers::spec::{BatchNormSpec, LayerSpec};
use caffe_geeps::proto::net::{Filler, LayerKind, NetParam, PoolRound, LAYER_TYPES};
use common::net_err;

/// The settings of the one layer `src` declares.
fn read(src: &str) -> LayerKind {
    let net = NetParam::parse(src, Path::new("one.prototxt")).unwrap_or_else(|e| panic!("{e}\n{src}"));
    assert_eq!(net.layers.len(), 1);
    net.layers[0].kind.clone()
}

fn spec(ty: &str, body: &str) -> LayerSpec {
    match read(&format!("layer {{ name: \"x\" type: \"{ty}\" top: \"t\" {body} }}")) {
        LayerKind::Spec(s) => s,
        other => panic!("{ty} read as {other:?}"),
    }
}

#[test]
fn defaults_are_caffes() {
    assert_eq!(spec("LRN", ""), LayerSpec::Lrn(LrnConf::default()));
    assert_eq!(spec("Concat", ""), LayerSpec::Concat { axis: 1 });
    assert_eq!(spec("Eltwise", ""), LayerSpec::Eltwise(EltwiseOp::Sum(vec![])));
    assert_eq!(spec("Flatten", ""), LayerSpec::Flatten { axis: 1, end_axis: -1 });
    assert_eq!(spec("Softmax", ""), LayerSpec::Softmax { axis: 1 });
    assert_eq!(spec("BatchNorm", ""), LayerSpec::BatchNorm(BatchNormSpec::default()));
    assert_eq!(spec("Scale", ""), LayerSpec::Scale(ScaleConf::default()));
    assert_eq!(spec("PReLU", ""), LayerSpec::PRelu { channel_shared: false, filler: Filler::Constant(0.25) });
    assert_eq!(spec("Power", ""), LayerSpec::Power(PowerConf::default()));
    let LayerKind::Convolution(c) =
        read("layer { name: \"c\" type: \"Convolution\" convolution_param { num_output: 4 kernel_size: 3 } }")
    else {
        panic!()
    };
    assert_eq!((c.group, c.dilation, c.bias_term), (1, (1, 1), true));
    // Every listed type has a reader: none is refused as unknown.
    for ty in LAYER_TYPES {
        let src = format!("layer {{ name: \"x\" type: \"{ty}\" }}");
        if let Err(e) = NetParam::parse(&src, Path::new("t.prototxt")) {
            assert!(!e.to_string().contains("unknown layer type"), "{ty}: {e}");
        }
    }
}

/// `round_mode` is honoured: rounding up by default (Caffe's), down when
/// written `FLOOR` (DenseNet's first pooling).
#[test]
fn pooling_round_mode_is_read() {
    let round = |extra: &str| {
        let src =
            format!("layer {{ name: \"p\" type: \"Pooling\" pooling_param {{ kernel_size: 3 stride: 2 {extra} }} }}");
        match read(&src) {
            LayerKind::Pooling(c) => c.round,
            other => panic!("read as {other:?}"),
        }
    };
    assert_eq!(round(""), PoolRound::Ceil);
    assert_eq!(round("round_mode: CEIL"), PoolRound::Ceil);
    assert_eq!(round("round_mode: FLOOR"), PoolRound::Floor);
}

#[test]
fn written_values_are_read() {
    let lrn = "lrn_param { local_size: 3 alpha: 0.0001 beta: 0.5 k: 2 norm_region: WITHIN_CHANNEL engine: CAFFE }";
    let want = LrnConf { local_size: 3, alpha: 0.0001, beta: 0.5, k: 2.0, region: NormRegion::WithinChannel };
    assert_eq!(spec("LRN", lrn), LayerSpec::Lrn(want));
    assert_eq!(spec("Concat", "concat_param { axis: -3 }"), LayerSpec::Concat { axis: -3 });
    assert_eq!(spec("Concat", "concat_param { concat_dim: 0 }"), LayerSpec::Concat { axis: 0 }, "the old field");
    let sum = spec("Eltwise", "eltwise_param { operation: SUM coeff: 1 coeff: -1 }");
    assert_eq!(sum, LayerSpec::Eltwise(EltwiseOp::Sum(vec![1.0, -1.0])));
    assert_eq!(spec("Eltwise", "eltwise_param { operation: PROD }"), LayerSpec::Eltwise(EltwiseOp::Prod));
    assert_eq!(spec("Eltwise", "eltwise_param { operation: MAX }"), LayerSpec::Eltwise(EltwiseOp::Max));
    assert_eq!(spec("Flatten", "flatten_param { axis: 2 end_axis: 3 }"), LayerSpec::Flatten { axis: 2, end_axis: 3 });
    let reshape = spec("Reshape", "reshape_param { shape { dim: 0 dim: -1 dim: 4 } axis: 1 num_axes: 2 }");
    assert_eq!(reshape, LayerSpec::Reshape { dims: vec![0, -1, 4], axis: 1, num_axes: 2 });
    assert_eq!(spec("Softmax", "softmax_param { axis: -1 }"), LayerSpec::Softmax { axis: -1 });
    let bn = spec("BatchNorm", "batch_norm_param { use_global_stats: true moving_average_fraction: 0.9 eps: 0.001 }");
    let want = BatchNormSpec { use_global_stats: Some(true), moving_average_fraction: 0.9, eps: 0.001 };
    assert_eq!(bn, LayerSpec::BatchNorm(want));
    let scale = spec(
        "Scale",
        "scale_param { axis: 0 num_axes: -1 bias_term: true filler { type: \"constant\" value: 2 } \
         bias_filler { type: \"uniform\" min: -1 max: 1 } }",
    );
    let want = ScaleConf {
        axis: 0,
        num_axes: -1,
        bias_term: true,
        filler: Filler::Constant(2.0),
        bias_filler: Filler::Uniform { min: -1.0, max: 1.0 },
    };
    assert_eq!(scale, LayerSpec::Scale(want));
    let prelu = spec("PReLU", "prelu_param { channel_shared: true filler { type: \"constant\" value: 0.1 } }");
    assert_eq!(prelu, LayerSpec::PRelu { channel_shared: true, filler: Filler::Constant(0.1) });
    let power = spec("Power", "power_param { power: 2 scale: 0.5 shift: -1 }");
    assert_eq!(power, LayerSpec::Power(PowerConf { power: 2.0, scale: 0.5, shift: -1.0 }));
    let input = read(
        "layer { name: \"in\" type: \"Input\" top: \"a\" top: \"b\" \
         input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }",
    );
    assert_eq!(input, LayerKind::Spec(LayerSpec::Input { shapes: vec![vec![2, 3], vec![2]], tops: 2 }));
    let conv = "layer { name: \"c\" type: \"Convolution\" convolution_param { num_output: 4 kernel_size: 3 \
                group: 2 dilation: 2 dilation: 3 bias_term: false } }";
    let LayerKind::Convolution(c) = read(conv) else { panic!() };
    assert_eq!((c.group, c.dilation, c.bias_term), (2, (2, 3), false));
}

#[test]
fn transform_param_is_read_whole() {
    let src = "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n\
               transform_param { mirror: true crop_size: 227 mean_value: 104 mean_value: 117 mean_value: 123 scale: 0.5 }\n\
               data_param { source: \"db\" batch_size: 4 backend: LMDB prefetch: 2 } }";
    let LayerKind::Data(d) = read(src) else { panic!() };
    assert_eq!((d.mirror, d.crop_size, d.scale, d.mean_file), (true, 227, 0.5, None));
    assert_eq!(d.mean_values, [104.0, 117.0, 123.0]);
    let file = read(&src.replace("mean_value: 104 mean_value: 117 mean_value: 123", "mean_file: \"m.binaryproto\""));
    let LayerKind::Data(d) = file else { panic!() };
    assert_eq!((d.mean_file.as_deref(), d.mean_values.len()), (Some("m.binaryproto"), 0));
}

#[test]
fn wrong_enum_values_list_the_allowed_ones() {
    let (line, msg) = net_err("layer {\n name: \"n\"\n type: \"LRN\"\n lrn_param {\n  norm_region: ACROSS\n }\n}\n");
    assert_eq!(line, 5);
    assert!(msg.contains("`ACROSS`") && msg.contains("ACROSS_CHANNELS, WITHIN_CHANNEL"), "{msg}");
    let (line, msg) = net_err("layer {\n name: \"e\"\n type: \"Eltwise\"\n eltwise_param { operation: AVG }\n}\n");
    assert_eq!(line, 4);
    assert!(msg.contains("`AVG`") && msg.contains("PROD, SUM, MAX"), "{msg}");
}

#[test]
fn out_of_range_values_say_what_to_write() {
    let layer = |ty: &str, param: &str| format!("layer {{\n name: \"x\"\n type: \"{ty}\"\n {param}\n}}\n");
    let cases: [(&str, &str, usize, &str); 14] = [
        ("LRN", "lrn_param {\n  local_size: 4\n }", 5, "local_size 4 must be odd"),
        ("LRN", "lrn_param {\n  k: 0\n }", 5, "k 0 must be positive"),
        ("BatchNorm", "batch_norm_param {\n  moving_average_fraction: 1.5\n }", 5, "must be in [0, 1]"),
        ("BatchNorm", "batch_norm_param {\n  eps: 0\n }", 5, "eps 0 must be positive"),
        ("Concat", "concat_param {\n  axis: 1\n  concat_dim: 1\n }", 6, "not both; keep `axis`"),
        ("Eltwise", "eltwise_param {\n  operation: MAX\n  coeff: 2\n }", 6, "coeff applies to operation: SUM only"),
        ("Reshape", "reshape_param {\n  shape {\n   dim: 0\n   dim: -2\n  }\n }", 7, "dim -2 is invalid"),
        ("Reshape", "reshape_param {\n  shape { dim: -1 dim: -1 }\n }", 5, "only one dim can be -1"),
        ("Reshape", "reshape_param {\n }", 4, "needs `shape { dim: ... }`"),
        ("Scale", "scale_param {\n  num_axes: -2\n }", 5, "num_axes -2 must be -1"),
        (
            "PReLU",
            "prelu_param {\n  filler { type: \"positive_unitball\" }\n }",
            5,
            "unknown filler type `positive_unitball`",
        ),
        (
            "Input",
            "top: \"a\"\n top: \"b\"\n top: \"c\"\n input_param {\n  shape { dim: 1 }\n  shape { dim: 2 }\n }",
            7,
            "2 shapes for 3 tops",
        ),
        (
            "Input",
            "input_param {\n  shape {\n   dim: 2\n   dim: 0\n  }\n }",
            7,
            "every dim of an input must be at least 1",
        ),
        (
            "Convolution",
            "convolution_param {\n  num_output: 6\n  kernel_size: 3\n  group: 4\n }",
            7,
            "group 4 must divide num_output 6",
        ),
    ];
    for (ty, param, want_line, want) in cases {
        let (line, msg) = net_err(&layer(ty, param));
        assert!(msg.contains(want), "{ty} {param}: {msg}");
        assert_eq!(line, want_line, "{ty} {param}: {msg}");
    }
    let conv = layer("Convolution", "convolution_param {\n  num_output: 6\n  kernel_size: 3\n  dilation: 0\n }");
    assert_eq!(net_err(&conv), (7, "dilation must be at least 1 (1: no dilation)".into()));
    let conv =
        layer("Convolution", "convolution_param {\n  num_output: 6\n  kernel_size: 3\n  dilation: [1, 2, 3]\n }");
    assert!(net_err(&conv).1.contains("`dilation` takes one or two values"));

    let data = |transform: &str, data: &str| {
        format!("layer {{\n name: \"d\"\n type: \"Data\"\n transform_param {{\n{transform} }}\n data_param {{ source: \"s\" batch_size: 1\n{data} }}\n}}\n")
    };
    let (line, msg) = net_err(&data("  mean_file: \"m\"\n  mean_value: 3\n", ""));
    assert_eq!(line, 6);
    assert!(msg.contains("`mean_file` or `mean_value`, not both"), "{msg}");
    let (line, msg) = net_err(&data("", "  crop_size: 4\n"));
    assert_eq!(line, 7);
    assert!(msg.contains("write it as transform_param { crop_size }"), "{msg}");
}

#[test]
fn a_param_on_the_wrong_type_is_named() {
    let (line, msg) =
        net_err("layer {\n name: \"c\"\n type: \"Concat\"\n bottom: \"a\"\n lrn_param { local_size: 3 }\n}\n");
    assert_eq!(line, 5);
    assert!(msg.contains("`lrn_param` does not apply to a Concat layer; remove it"), "{msg}");
    let (line, msg) = net_err("layer {\n name: \"s\"\n type: \"Scale\"\n batch_norm_param { eps: 0.1 }\n}\n");
    assert_eq!(line, 4);
    assert!(msg.contains("`batch_norm_param` does not apply to a Scale layer"), "{msg}");
    let (line, msg) = net_err("layer {\n name: \"l\"\n type: \"LRN\"\n\n convolution_param { group: 2 }\n}\n");
    assert_eq!(line, 5);
    assert!(msg.contains("`convolution_param` does not apply to a LRN layer"), "{msg}");
}

//! The `*_param` of Caffe's remaining standard layers as the reader turns
//! them into settings: Caffe's defaults when a field is not written, the
//! written values when it is, and every bad or unsupported value refused
//! at its line with what to write instead.

mod common;

use std::path::Path;

use caffe_geeps::layers::spec::{LayerSpec, LossNorm};
use caffe_geeps::proto::layer_conf::{Filler, PoolMethod};
use caffe_geeps::proto::net::{LayerKind, NetParam};
use caffe_geeps::proto::standard_conf::{
    ArgMaxConf, BiasConf, ContrastiveConf, EmbedConf, HingeNorm, MvnConf, ReductionConf, ReductionOp, SppConf,
};
use common::net_err;

fn spec(ty: &str, body: &str) -> LayerSpec {
    let src = format!("layer {{ name: \"x\" type: \"{ty}\" top: \"t\" top: \"u\" {body} }}");
    let net = NetParam::parse(&src, Path::new("one.prototxt")).unwrap_or_else(|e| panic!("{e}\n{src}"));
    match &net.layers[0].kind {
        LayerKind::Spec(s) => s.clone(),
        other => panic!("{ty} read as {other:?}"),
    }
}

#[test]
fn defaults_are_caffes() {
    assert_eq!(spec("Slice", ""), LayerSpec::Slice { axis: 1, points: vec![], tops: 2 });
    assert_eq!(spec("Crop", ""), LayerSpec::Crop { axis: 2, offsets: vec![] });
    assert_eq!(spec("Bias", ""), LayerSpec::Bias(BiasConf::default()));
    assert_eq!(spec("Reduction", ""), LayerSpec::Reduction(ReductionConf::default()));
    assert_eq!(spec("ArgMax", ""), LayerSpec::ArgMax(ArgMaxConf { out_max_val: false, top_k: 1, axis: None }));
    assert_eq!(spec("MVN", ""), LayerSpec::Mvn(MvnConf::default()));
    assert_eq!(spec("ContrastiveLoss", ""), LayerSpec::ContrastiveLoss(ContrastiveConf::default()));
    assert_eq!(spec("HingeLoss", ""), LayerSpec::HingeLoss(HingeNorm::L1));
    assert_eq!(spec("MultinomialLogisticLoss", ""), LayerSpec::MultinomialLogisticLoss);
    let LayerSpec::Deconvolution(d) = spec("Deconvolution", "convolution_param { num_output: 2 kernel_size: 4 }")
    else {
        panic!()
    };
    assert_eq!((d.num_output, d.kernel, d.stride, d.pad, d.group, d.bias_term), (2, (4, 4), (1, 1), (0, 0), 1, true));
}

#[test]
fn written_values_are_read() {
    let s = spec("Slice", "slice_param { axis: -1 slice_point: 3 }");
    assert_eq!(s, LayerSpec::Slice { axis: -1, points: vec![3], tops: 2 });
    assert_eq!(spec("Slice", "slice_param { slice_dim: 0 }"), LayerSpec::Slice { axis: 0, points: vec![], tops: 2 });
    assert_eq!(
        spec("Crop", "crop_param { axis: 1 offset: 2 offset: 3 }"),
        LayerSpec::Crop { axis: 1, offsets: vec![2, 3] }
    );
    let bias = spec("Bias", "bias_param { axis: 0 num_axes: -1 filler { type: \"constant\" value: 0.5 } }");
    assert_eq!(bias, LayerSpec::Bias(BiasConf { axis: 0, num_axes: -1, filler: Filler::Constant(0.5) }));
    assert_eq!(spec("Tile", "tile_param { axis: 0 tiles: 3 }"), LayerSpec::Tile { axis: 0, tiles: 3 });
    let red = spec("Reduction", "reduction_param { operation: ASUM axis: 1 coeff: -2 }");
    assert_eq!(red, LayerSpec::Reduction(ReductionConf { op: ReductionOp::Asum, axis: 1, coeff: -2.0 }));
    let am = spec("ArgMax", "argmax_param { out_max_val: true top_k: 3 axis: -1 }");
    assert_eq!(am, LayerSpec::ArgMax(ArgMaxConf { out_max_val: true, top_k: 3, axis: Some(-1) }));
    let embed = spec(
        "Embed",
        "embed_param { num_output: 4 input_dim: 7 bias_term: false weight_filler { type: \"gaussian\" std: 0.5 } }",
    );
    let want = EmbedConf {
        num_output: 4,
        input_dim: 7,
        bias_term: false,
        weight_filler: Filler::Gaussian { mean: 0.0, std: 0.5 },
        bias_filler: Filler::Constant(0.0),
    };
    assert_eq!(embed, LayerSpec::Embed(want));
    let mvn = spec("MVN", "mvn_param { normalize_variance: false across_channels: true eps: 0.001 }");
    assert_eq!(mvn, LayerSpec::Mvn(MvnConf { normalize_variance: false, across_channels: true, eps: 0.001 }));
    let spp = spec("SPP", "spp_param { pyramid_height: 3 pool: AVE engine: CAFFE }");
    assert_eq!(spp, LayerSpec::Spp(SppConf { pyramid_height: 3, method: PoolMethod::Ave }));
    let par = spec("Parameter", "parameter_param { shape { dim: 2 dim: 5 } }");
    assert_eq!(par, LayerSpec::Parameter { shape: vec![2, 5] });
    let c = spec("ContrastiveLoss", "contrastive_loss_param { margin: 2 legacy_version: true }");
    assert_eq!(c, LayerSpec::ContrastiveLoss(ContrastiveConf { margin: 2.0, legacy_version: true }));
    assert_eq!(spec("HingeLoss", "hinge_loss_param { norm: L2 }"), LayerSpec::HingeLoss(HingeNorm::L2));
    let LayerSpec::InfogainLoss(i) = spec(
        "InfogainLoss",
        "loss_param { normalization: BATCH_SIZE } infogain_loss_param { source: \"H.binaryproto\" axis: 2 }",
    ) else {
        panic!()
    };
    assert_eq!((i.axis, i.norm, i.source.as_deref(), i.matrix.len()), (2, LossNorm::Batch, Some("H.binaryproto"), 0));
}

#[test]
fn bad_values_are_refused_at_their_line() {
    let layer = |ty: &str, param: &str| {
        format!("layer {{\n name: \"x\"\n type: \"{ty}\"\n top: \"a\"\n top: \"b\"\n {param}\n}}\n")
    };
    let cases: &[(&str, &str, usize, &str)] = &[
        ("Slice", "slice_param {\n  axis: 1\n  slice_dim: 1\n }", 8, "not both"),
        ("Slice", "slice_param {\n  slice_point: 1\n  slice_point: 2\n }", 7, "2 slice_point for 2 tops"),
        ("Slice", "slice_param {\n  slice_point: 0\n }", 7, "slice_point 0"),
        ("Tile", "tile_param {\n  axis: 1\n }", 6, "needs `tile_param { tiles: N }`"),
        ("Tile", "tile_param {\n  tiles: 0\n }", 7, "tiles 0 must be at least 1"),
        ("Bias", "bias_param {\n  num_axes: -2\n }", 7, "num_axes -2"),
        ("ArgMax", "argmax_param {\n  top_k: 0\n }", 7, "top_k must be at least 1"),
        ("Embed", "embed_param {\n  num_output: 3\n }", 6, "input_dim >= 1"),
        ("MVN", "mvn_param {\n  eps: -1\n }", 7, "eps -1"),
        ("SPP", "spp_param {\n  pyramid_height: 2\n  pool: STOCHASTIC\n }", 8, "STOCHASTIC is not supported"),
        ("SPP", "spp_param {\n }", 6, "pyramid_height"),
        ("Parameter", "parameter_param {\n  shape {\n   dim: 0\n  }\n }", 8, "at least 1"),
        ("ContrastiveLoss", "loss_param {\n  normalization: FULL\n }", 7, "divides by the batch size"),
        ("HingeLoss", "loss_param {\n  ignore_label: 3\n }", 7, "`ignore_label` does not apply to HingeLoss"),
        ("HingeLoss", "hinge_loss_param {\n  norm: L3\n }", 7, "`L3`"),
        ("Deconvolution", "convolution_param {\n  num_output: 4\n  kernel_size: 2\n  group: 3\n }", 9, "group 3"),
        ("Crop", "slice_param {\n  axis: 0\n }", 6, "`slice_param` does not apply to a Crop layer"),
        ("InfogainLoss", "bottom: \"x\"\n bottom: \"l\"\n", 1, "needs its matrix H"),
        (
            "InfogainLoss",
            "loss_param {\n  ignore_label: 0\n }\n infogain_loss_param { source: \"h\" }",
            7,
            "ignore_label",
        ),
    ];
    for &(ty, param, want_line, want) in cases {
        let (line, msg) = net_err(&layer(ty, param));
        assert!(msg.contains(want), "{ty} {param}: {msg}");
        assert_eq!(line, want_line, "{ty} {param}: {msg}");
    }
}

//! Caffe's weight sharing by `param { name }`: one parameter however many
//! layers use it; its gradient is the sum of theirs (checked against finite
//! differences of the loss), training through geeps matches training on
//! plain memory, and the mismatches Caffe refuses are refused, naming both
//! layers.

mod common;

use caffe_geeps::cli::cluster::Cluster;
use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::net::Net;
use caffe_geeps::proto::net::{NetParam, Phase};
use caffe_geeps::proto::solver::SolverParam;
use caffe_geeps::ps::PsOptions;
use caffe_geeps::solvers::solve::train;
use common::{assert_close, quiet, reference};

/// Two towers of one InnerProduct each over the halves of a Slice, the
/// second sharing the first's weights and bias, pulled apart by a
/// contrastive loss; `second` is the sharing layer's `param` blocks.
fn siamese(data: &str, second: &str) -> String {
    format!(
        r#"name: "towers"
{data}
layer {{ name: "slice" type: "Slice" bottom: "pair" top: "a" top: "b" slice_param {{ slice_dim: 1 slice_point: 1 }} }}
layer {{ name: "ip" type: "InnerProduct" bottom: "a" top: "fa"
  param {{ name: "w" lr_mult: 1 }} param {{ name: "bias" lr_mult: 2 }}
  inner_product_param {{ num_output: 3 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "ip_p" type: "InnerProduct" bottom: "b" top: "fb" {second}
  inner_product_param {{ num_output: NOUT weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "loss" type: "ContrastiveLoss" bottom: "fa" bottom: "fb" bottom: "sim" top: "loss" contrastive_loss_param {{ margin: 1 }} }}
"#
    )
    .replace("NOUT", "3")
}

const SHARED: &str = r#"param { name: "w" lr_mult: 1 } param { name: "bias" lr_mult: 2 }"#;

const DUMMY: &str = r#"layer { name: "d" type: "DummyData" top: "pair" top: "sim"
  dummy_data_param { shape { dim: 4 dim: 2 dim: 5 } shape { dim: 4 } data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }"#;

fn build(src: &str) -> Net {
    let dir = common::scratch("sharing-build");
    std::fs::write(dir.join("net.prototxt"), src).unwrap();
    let param = NetParam::load(&dir.join("net.prototxt")).unwrap();
    Net::build(&param, Phase::Train, &DataCache::default()).unwrap()
}

fn loss(net: &Net, layout: &ParamLayout, values: &[Vec<f32>]) -> (f32, Vec<Vec<f32>>) {
    let mut views: Vec<&[f32]> = vec![&[]; net.layers.len()];
    let mut grads = vec![Vec::new(); net.layers.len()];
    for (lp, v) in layout.layers.iter().zip(values) {
        for &u in &lp.users {
            views[u] = v;
            grads[u] = vec![0.0; lp.len];
        }
    }
    let mut plain = Plain::new(net, 0, 1).unwrap();
    let out = plain.forward(&views, true, 3).unwrap();
    plain.backward(&views, &mut grads);
    // The shared parameter's gradient: the sum over the layers using it.
    let summed = layout
        .layers
        .iter()
        .map(|lp| {
            let mut g = vec![0.0; lp.len];
            for &u in &lp.users {
                g.iter_mut().zip(&grads[u]).for_each(|(s, x)| *s += x);
            }
            g
        })
        .collect();
    (out[0], summed)
}

#[test]
fn a_shared_parameter_is_one_parameter_whose_gradient_sums_its_users() {
    let net = build(&siamese(DUMMY, SHARED));
    let layout = ParamLayout::of(&net);
    assert_eq!(layout.layers.len(), 1, "`ip_p` uses `ip`'s parameters: one parameter layer");
    assert_eq!(layout.layers[0].users, [2, 3]);
    let values = layout.initial(&net, 11);
    let (_, grad) = loss(&net, &layout, &values);
    assert!(grad[0].iter().any(|g| g.abs() > 1e-3), "a gradient to check: {:?}", grad[0]);
    let eps = 1e-2f32;
    for i in 0..values[0].len() {
        let at = |d: f32| {
            let mut v = values.clone();
            v[0][i] += d;
            loss(&net, &layout, &v).0
        };
        let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
        let g = grad[0][i];
        assert!((numeric - g).abs() <= 2e-3 + 2e-2 * g.abs(), "value {i}: analytic {g}, numeric {numeric}");
    }
}

#[test]
fn training_through_geeps_matches_plain_memory() {
    // The label as the similarity: any class but 0 counts as similar.
    let data = format!(
        r#"layer {{ name: "d" type: "Data" top: "pair" top: "sim" transform_param {{ scale: 0.00390625 }}
  data_param {{ source: "{}" batch_size: 8 }} }}"#,
        common::data("train")
    );
    // Fashion-MNIST images (1 channel): slice the 28 rows in two "towers" instead.
    let net = siamese(&data, SHARED)
        .replace(r#"slice_param { slice_dim: 1 slice_point: 1 }"#, r#"slice_param { axis: 2 slice_point: 14 }"#);
    let dir = common::scratch("sharing-train");
    let path = common::write(&dir, &net, &common::solver("net.prototxt", 4, 0, 0, ""));
    let solver = SolverParam::load(&path).unwrap();
    let (want, want_losses) = reference(&solver);
    let report = train(&solver, &quiet(PsOptions::default()), &Cluster::in_process(1).unwrap()).unwrap();
    assert_eq!(report.final_params.len(), 1, "one shared parameter layer");
    assert_close(&report.final_params, &want, "shared parameters through geeps");
    for (a, b) in report.losses.iter().zip(&want_losses) {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} vs {b}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn refusal(second: &str) -> String {
    let dir = common::scratch("sharing-refused");
    std::fs::write(dir.join("net.prototxt"), siamese(DUMMY, second)).unwrap();
    let param = NetParam::load(&dir.join("net.prototxt")).unwrap();
    Net::build(&param, Phase::Train, &DataCache::default()).err().expect("refused").to_string()
}

#[test]
fn mismatches_are_refused_naming_both_layers() {
    let dir = common::scratch("sharing-shape");
    // Uneven halves: the towers read 4 and 6 values, so the weights would be 3x4 and 3x6.
    let src = siamese(DUMMY, SHARED).replace("slice_dim: 1 slice_point: 1", "axis: 2 slice_point: 2");
    std::fs::write(dir.join("net.prototxt"), &src).unwrap();
    let param = NetParam::load(&dir.join("net.prototxt")).unwrap();
    let e = Net::build(&param, Phase::Train, &DataCache::default()).err().expect("refused").to_string();
    assert!(e.contains("cannot share param `w` owned by layer `ip` with layer `ip_p`: shape mismatch"), "{e}");
    assert!(e.contains("[3, 4]") && e.contains("[3, 6]"), "{e}");

    let e = refusal(r#"param { name: "w" lr_mult: 3 } param { name: "bias" lr_mult: 2 }"#);
    assert!(e.contains("shared param `w` has mismatched lr_mult: 1 in layer `ip`, 3 in layer `ip_p`"), "{e}");
    let e = refusal(r#"param { name: "w" }"#);
    assert!(e.contains("does not name all of its 2 parameter blob(s)"), "{e}");
    // Swapped names: the bias would be the weights.
    let e = refusal(r#"param { name: "bias" } param { name: "w" }"#);
    assert!(e.contains("cannot share param `bias` owned by layer `ip` with layer `ip_p`"), "{e}");
    let e = refusal(r#"param { name: "w" } param { name: "own_bias" }"#);
    assert!(e.contains("shares `own_bias` with layer `ip` but not as a whole layer"), "{e}");
    // Caffe's own file shape: a multiplier only the sharer writes becomes the blob's.
    let net =
        build(&siamese(DUMMY, SHARED).replacen(r#"param { name: "bias" lr_mult: 2 }"#, r#"param { name: "bias" }"#, 1));
    assert_eq!(ParamLayout::of(&net).layers[0].blobs[1].spec.lr_mult, 2.0);
}

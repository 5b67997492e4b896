//! Caffe's automatic Split layers inside a built net: a blob read by two
//! layers gets a Split, and the gradient reaching the blob's producer is the
//! sum of what both readers send back.

mod common;

use std::path::Path;

use caffe_geeps::data::DataCache;
use caffe_geeps::net::params::ParamLayout;
use caffe_geeps::net::plain::Plain;
use caffe_geeps::net::Net;
use caffe_geeps::proto::net::{NetParam, Phase};

/// ip1 feeds two heads, each with its own loss (weights `w1`, `w2`).
fn two_heads(w1: f32, w2: f32) -> String {
    format!(
        r#"name: "heads"
layer {{ name: "d" type: "Data" top: "data" top: "label"
  transform_param {{ scale: 0.00390625 }} data_param {{ source: "{src}" batch_size: 4 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param {{ num_output: 6 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" value: 0.1 }} }} }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "xavier" }} }} }}
layer {{ name: "ip3" type: "InnerProduct" bottom: "ip1" top: "ip3"
  inner_product_param {{ num_output: 10 weight_filler {{ type: "gaussian" std: 0.3 }} }} }}
layer {{ name: "loss2" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss2" loss_weight: {w1} }}
layer {{ name: "loss3" type: "SoftmaxWithLoss" bottom: "ip3" bottom: "label" top: "loss3" loss_weight: {w2} }}
"#,
        src = common::data("train")
    )
}

/// ip1's parameter gradient after one forward and backward.
fn ip1_gradient(net: &Net) -> Vec<f32> {
    let layout = ParamLayout::of(net);
    let params = layout.initial(net, 3);
    let mut views: Vec<&[f32]> = vec![&[]; net.layers.len()];
    let mut grads: Vec<Vec<f32>> = vec![Vec::new(); net.layers.len()];
    for (lp, v) in layout.layers.iter().zip(&params) {
        views[lp.layer] = v;
        grads[lp.layer] = vec![0.0; lp.len];
    }
    let mut plain = Plain::new(net, 0, 1).unwrap();
    plain.forward(&views, true, 0).unwrap();
    plain.backward(&views, &mut grads);
    let ip1 = net.layers.iter().position(|l| l.name == "ip1").unwrap();
    grads[ip1].clone()
}

fn build(src: &str) -> Net {
    let param = NetParam::parse(src, Path::new("heads.prototxt")).unwrap();
    Net::build(&param, Phase::Train, &DataCache::default()).unwrap()
}

#[test]
fn a_shared_blob_gets_a_split_and_summed_gradients() {
    let both = build(&two_heads(1.0, 0.5));
    let split = both.layers.iter().find(|l| l.name == "ip1_ip1_0_split").expect("a Split layer for ip1");
    assert_eq!(split.type_name, "Split");
    let tops: Vec<_> = split.tops.iter().map(|&t| both.blobs[t].name.as_str()).collect();
    assert_eq!(tops, ["ip1_ip1_0_split_0", "ip1_ip1_0_split_1"]);
    assert!(split.backward && split.propagate == [true]);
    // The label feeds two losses too; its Split runs no backward.
    let label_split = both.layers.iter().find(|l| l.name == "label_d_1_split").expect("a Split for the label");
    assert!(!label_split.backward);
    both.check_labels().unwrap();

    let sum = ip1_gradient(&both);
    let first = ip1_gradient(&build(&two_heads(1.0, 0.0)));
    let second = ip1_gradient(&build(&two_heads(0.0, 0.5)));
    assert!(sum.iter().any(|g| g.abs() > 1e-4));
    for (i, (s, (a, b))) in sum.iter().zip(first.iter().zip(&second)).enumerate() {
        assert!((s - (a + b)).abs() <= 1e-6 + 1e-4 * s.abs(), "ip1 gradient {i}: {s} vs {a} + {b}");
    }
}

#[test]
fn an_in_place_layer_on_a_blob_read_before_is_refused_by_name() {
    let src = format!(
        r#"layer {{ name: "d" type: "Data" top: "data" top: "label"
  data_param {{ source: "{}" batch_size: 2 }} }}
layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" inner_product_param {{ num_output: 10 }} }}
layer {{ name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" inner_product_param {{ num_output: 10 }} }}
layer {{ name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }}
"#,
        common::data("train")
    );
    let param = NetParam::parse(&src, Path::new("n.prototxt")).unwrap();
    let err = Net::build(&param, Phase::Train, &DataCache::default()).err().expect("refused").to_string();
    assert!(err.contains("n.prototxt:5") && err.contains("works in place on `ip1`"), "{err}");
}

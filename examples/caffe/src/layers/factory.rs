//! Building a layer from its parsed type and settings (Caffe's
//! `layer_factory`): the LeNet types here, the others through `spec`. It
//! owns the bottom-count checks of those types; it must never compute.

use super::{accuracy, activation, conv, dropout, inner_product, pool, softmax_loss, spec};
use crate::layers::layer::{Layer, Shape};
use crate::proto::net_param::LayerKind;

/// Builds a layer for its bottoms' shapes, in a TRAIN (`train`) or TEST
/// net. `Data` has no compute and is handled by the net. Errors say what is
/// wrong with the shapes.
pub fn build(kind: &LayerKind, bottoms: &[Shape], train: bool) -> Result<Box<dyn Layer>, String> {
    let want = |n: usize| {
        if bottoms.len() == n {
            Ok(())
        } else {
            Err(format!("takes {n} bottom blob(s), has {}", bottoms.len()))
        }
    };
    Ok(match kind {
        LayerKind::Data(_) => return Err("Data layers have no compute".into()),
        LayerKind::Convolution(c) => {
            want(1)?;
            Box::new(conv::Conv::new(&c.into(), &bottoms[0])?)
        }
        LayerKind::Pooling(p) => {
            want(1)?;
            Box::new(pool::Pool::new(p, &bottoms[0])?)
        }
        LayerKind::InnerProduct(c) => {
            want(1)?;
            Box::new(inner_product::InnerProduct::new(c, &bottoms[0])?)
        }
        LayerKind::ReLU { negative_slope } => {
            want(1)?;
            Box::new(activation::Activation::new(activation::Fn::ReLU(*negative_slope), &bottoms[0]))
        }
        LayerKind::Sigmoid => {
            want(1)?;
            Box::new(activation::Activation::new(activation::Fn::Sigmoid, &bottoms[0]))
        }
        LayerKind::TanH => {
            want(1)?;
            Box::new(activation::Activation::new(activation::Fn::TanH, &bottoms[0]))
        }
        LayerKind::Dropout { ratio } => {
            want(1)?;
            Box::new(dropout::Dropout::new(*ratio, &bottoms[0]))
        }
        LayerKind::SoftmaxWithLoss { normalization } => {
            want(2)?;
            Box::new(softmax_loss::SoftmaxLoss::new(*normalization, &bottoms[0], &bottoms[1])?)
        }
        LayerKind::Accuracy { top_k } => {
            want(2)?;
            Box::new(accuracy::Accuracy::new(*top_k, &bottoms[0], &bottoms[1])?)
        }
        LayerKind::Spec(s) => return spec::build(s, bottoms, train),
    })
}

//! Building a layer of the types beyond LeNet's from its settings
//! (`proto::layer_spec`): the one step between a parsed `LayerParameter` and
//! compute. It resolves what depends on the phase (BatchNorm's statistics);
//! it must never read files.

use crate::layers::argmax::ArgMax;
use crate::layers::batch_norm::BatchNorm;
use crate::layers::bias::Bias;
use crate::layers::concat::Concat;
use crate::layers::contrastive_loss::ContrastiveLoss;
use crate::layers::conv::Conv;
use crate::layers::crop::Crop;
use crate::layers::deconv::Deconv;
use crate::layers::dummy_data::DummyData;
use crate::layers::eltwise::Eltwise;
use crate::layers::embed::Embed;
use crate::layers::euclidean_loss::EuclideanLoss;
use crate::layers::hinge_loss::HingeLoss;
use crate::layers::infogain_loss::InfogainLoss;
use crate::layers::input::Input;
use crate::layers::layer::{Layer, Shape};
use crate::layers::lrn::Lrn;
use crate::layers::multinomial_logistic_loss::MultinomialLogisticLoss;
use crate::layers::mvn::Mvn;
use crate::layers::parameter::Parameter;
use crate::layers::pointwise::Pointwise;
use crate::layers::pointwise_in_place::PointwiseInPlace;
use crate::layers::power::Power;
use crate::layers::prelu::PRelu;
use crate::layers::reduction::Reduction;
use crate::layers::reshape::Reshape;
use crate::layers::scale::Scale;
use crate::layers::sigmoid_cross_entropy_loss::SigmoidCrossEntropyLoss;
use crate::layers::silence::Silence;
use crate::layers::slice::Slice;
use crate::layers::softmax::Softmax;
use crate::layers::spp::Spp;
use crate::layers::tile::Tile;
use crate::proto::layer_conf::BatchNormConf;
// Where callers building a layer look for its settings.
pub use crate::proto::layer_spec::{BatchNormSpec, LayerSpec, LossNorm, NeuronFn};

/// The layer `spec` describes, for these bottoms in a TRAIN (`train`) or TEST net.
pub fn build(spec: &LayerSpec, bottoms: &[Shape], train: bool) -> Result<Box<dyn Layer>, String> {
    let one = || match bottoms {
        [b] => Ok(b),
        _ => Err(format!("takes 1 bottom blob, has {}", bottoms.len())),
    };
    Ok(match spec {
        LayerSpec::Convolution(c) => Box::new(Conv::new(c, one()?)?),
        LayerSpec::Lrn(c) => Box::new(Lrn::new(*c, one()?)?),
        LayerSpec::Concat { axis } => Box::new(Concat::new(*axis, bottoms)?),
        LayerSpec::Eltwise(op) => Box::new(Eltwise::new(op.clone(), bottoms)?),
        LayerSpec::Flatten { axis, end_axis } => Box::new(Reshape::flatten(*axis, *end_axis, one()?)?),
        LayerSpec::Reshape { dims, axis, num_axes } => Box::new(Reshape::new(dims, *axis, *num_axes, one()?)?),
        LayerSpec::Softmax { axis } => Box::new(Softmax::new(*axis, one()?)?),
        LayerSpec::BatchNorm(s) => {
            let conf = BatchNormConf {
                use_global_stats: s.use_global_stats.unwrap_or(!train),
                moving_average_fraction: s.moving_average_fraction,
                eps: s.eps,
            };
            Box::new(BatchNorm::new(conf, one()?)?)
        }
        LayerSpec::Scale(c) => match bottoms {
            [b] => Box::new(Scale::new(c.clone(), b)?),
            _ => {
                return Err(
                    "the two-bottom form of Scale (scale from a blob) is not supported; learn it with one bottom"
                        .into(),
                )
            }
        },
        LayerSpec::PRelu { channel_shared, filler } => Box::new(PRelu::new(*channel_shared, filler.clone(), one()?)?),
        LayerSpec::Power(c) => Box::new(Power::new(*c, one()?)),
        LayerSpec::Input { shapes, tops } => {
            if !bottoms.is_empty() {
                return Err(format!("takes no bottom blob, has {}", bottoms.len()));
            }
            Box::new(Input::new(shapes, *tops)?)
        }
        LayerSpec::DummyData { shapes, fillers } => {
            if !bottoms.is_empty() {
                return Err(format!("takes no bottom blob, has {}", bottoms.len()));
            }
            Box::new(DummyData::new(shapes, fillers)?)
        }
        LayerSpec::Neuron(f @ (NeuronFn::Exp { .. } | NeuronFn::Elu(_))) => {
            Box::new(PointwiseInPlace::new(*f, one()?)?)
        }
        LayerSpec::Neuron(f) => Box::new(Pointwise::new(*f, one()?)?),
        LayerSpec::Silence => Box::new(Silence::new(bottoms)?),
        LayerSpec::EuclideanLoss => Box::new(EuclideanLoss::new(bottoms)?),
        LayerSpec::SigmoidCrossEntropyLoss(norm) => Box::new(SigmoidCrossEntropyLoss::new(*norm, bottoms)?),
        LayerSpec::Slice { axis, points, tops } => Box::new(Slice::new(*axis, points, *tops, one()?)?),
        LayerSpec::Crop { axis, offsets } => Box::new(Crop::new(*axis, offsets, bottoms)?),
        LayerSpec::Deconvolution(c) => Box::new(Deconv::new(c, one()?)?),
        LayerSpec::Bias(c) => Box::new(Bias::new(c.clone(), bottoms)?),
        LayerSpec::Tile { axis, tiles } => Box::new(Tile::new(*axis, *tiles, one()?)?),
        LayerSpec::Reduction(c) => Box::new(Reduction::new(*c, one()?)?),
        LayerSpec::ArgMax(c) => Box::new(ArgMax::new(*c, one()?)?),
        LayerSpec::Embed(c) => Box::new(Embed::new(c.clone(), one()?)?),
        LayerSpec::Mvn(c) => Box::new(Mvn::new(*c, one()?)?),
        LayerSpec::Spp(c) => Box::new(Spp::new(*c, one()?)?),
        LayerSpec::Parameter { shape } => Box::new(Parameter::new(shape, bottoms)?),
        LayerSpec::ContrastiveLoss(c) => Box::new(ContrastiveLoss::new(*c, bottoms)?),
        LayerSpec::HingeLoss(norm) => Box::new(HingeLoss::new(*norm, bottoms)?),
        LayerSpec::MultinomialLogisticLoss => Box::new(MultinomialLogisticLoss::new(bottoms)?),
        LayerSpec::InfogainLoss(c) => {
            let matrix = (bottoms.len() == 2).then_some(c.matrix.as_slice());
            Box::new(InfogainLoss::new(c.axis, c.norm, matrix, bottoms)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::layer_conf::{ConvSpec, EltwiseOp, Filler, LrnConf, NormRegion, PowerConf, ScaleConf};

    #[test]
    fn every_spec_builds_its_layer_with_caffe_defaults() {
        let img = vec![2, 4, 6, 6];
        let conv = ConvSpec {
            num_output: 4,
            kernel: (3, 3),
            stride: (1, 1),
            pad: (1, 1),
            dilation: (2, 2),
            group: 2,
            bias_term: true,
            weight_filler: Filler::Constant(0.0),
            bias_filler: Filler::Constant(0.0),
        };
        let cases: Vec<(LayerSpec, Vec<Shape>, Vec<Shape>)> = vec![
            (LayerSpec::Convolution(conv), vec![img.clone()], vec![vec![2, 4, 4, 4]]),
            (
                LayerSpec::Lrn(LrnConf { region: NormRegion::WithinChannel, ..LrnConf::default() }),
                vec![img.clone()],
                vec![img.clone()],
            ),
            (LayerSpec::Concat { axis: 1 }, vec![img.clone(), img.clone()], vec![vec![2, 8, 6, 6]]),
            (LayerSpec::Eltwise(EltwiseOp::Sum(vec![])), vec![img.clone(), img.clone()], vec![img.clone()]),
            (LayerSpec::Flatten { axis: 1, end_axis: -1 }, vec![img.clone()], vec![vec![2, 144]]),
            (LayerSpec::Reshape { dims: vec![0, -1], axis: 0, num_axes: -1 }, vec![img.clone()], vec![vec![2, 144]]),
            (LayerSpec::Softmax { axis: 1 }, vec![img.clone()], vec![img.clone()]),
            (LayerSpec::BatchNorm(BatchNormSpec::default()), vec![img.clone()], vec![img.clone()]),
            (LayerSpec::Scale(ScaleConf::default()), vec![img.clone()], vec![img.clone()]),
            (
                LayerSpec::PRelu { channel_shared: false, filler: Filler::Constant(0.25) },
                vec![img.clone()],
                vec![img.clone()],
            ),
            (LayerSpec::Power(PowerConf::default()), vec![img.clone()], vec![img.clone()]),
            (LayerSpec::Input { shapes: vec![img.clone()], tops: 1 }, vec![], vec![img.clone()]),
        ];
        for (spec, bottoms, tops) in cases {
            let l = build(&spec, &bottoms, true).unwrap();
            assert_eq!((l.type_name(), l.top_shapes()), (spec.type_name(), tops), "{spec:?}");
        }
        let err = build(&LayerSpec::Softmax { axis: 1 }, &[img.clone(), img.clone()], true).err().unwrap();
        assert!(err.contains("takes 1 bottom"), "{err}");
        assert!(build(&LayerSpec::Scale(ScaleConf::default()), &[img.clone(), vec![4]], true)
            .err()
            .unwrap()
            .contains("two-bottom"));
    }

    #[test]
    fn batch_norm_statistics_follow_the_phase_unless_set() {
        let img = vec![2, 3];
        let auto = LayerSpec::BatchNorm(BatchNormSpec::default());
        let fixed = LayerSpec::BatchNorm(BatchNormSpec { use_global_stats: Some(true), ..BatchNormSpec::default() });
        // Batch statistics in TRAIN: the blobs change; stored ones: they do not.
        let changes = |spec: &LayerSpec, train: bool| {
            let l = build(spec, std::slice::from_ref(&img), train).unwrap();
            let mut aux = vec![0.0; l.aux_len()];
            let mut top = vec![1.0, 2.0, 3.0, 4.0, 5.0, 7.0];
            {
                let mut tops: Vec<&mut [f32]> = vec![&mut top];
                let f = crate::layers::Forward {
                    params: &[0.0; 7],
                    bottoms: &[],
                    tops: &mut tops,
                    aux: &mut aux,
                    train,
                    seed: 0,
                };
                l.forward(f);
            }
            let mut grad = vec![0.0; 7];
            let mut dx = vec![0.0; 6];
            l.backward(crate::layers::Backward {
                params: &[0.0; 7],
                bottoms: &[&[]],
                tops: &[&top],
                top_diffs: &[],
                bottom_diffs: &mut [&mut dx],
                param_grad: &mut grad,
                aux: &aux,
                loss_weight: 1.0,
            });
            grad.iter().any(|g| *g != 0.0)
        };
        assert!(changes(&auto, true) && !changes(&auto, false) && !changes(&fixed, true));
    }
}

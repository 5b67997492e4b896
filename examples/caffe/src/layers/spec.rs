//! The settings of the layer types beyond LeNet's, as plain values, and
//! building a layer from them: the one step between a parsed
//! `LayerParameter` and compute. Caffe's defaults live in the settings'
//! `Default`s and constructors; this module must never read files.

use crate::layers::batch_norm::{BatchNorm, BatchNormConf};
use crate::layers::concat::Concat;
use crate::layers::conv::{Conv, ConvSpec};
use crate::layers::eltwise::{Eltwise, EltwiseOp};
use crate::layers::input::Input;
use crate::layers::lrn::{Lrn, LrnConf};
use crate::layers::power::{Power, PowerConf};
use crate::layers::prelu::PRelu;
use crate::layers::reshape::Reshape;
use crate::layers::scale::{Scale, ScaleConf};
use crate::layers::softmax::Softmax;
use crate::layers::{Filler, Layer, Shape};

/// `batch_norm_param` as written: `use_global_stats` unset means Caffe's
/// phase default (batch statistics in TRAIN, stored ones in TEST).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNormSpec {
    pub use_global_stats: Option<bool>,
    pub moving_average_fraction: f32,
    pub eps: f32,
}

impl Default for BatchNormSpec {
    fn default() -> Self {
        let d = BatchNormConf::for_phase(true);
        BatchNormSpec { use_global_stats: None, moving_average_fraction: d.moving_average_fraction, eps: d.eps }
    }
}

/// A layer type with its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerSpec {
    Convolution(ConvSpec),
    Lrn(LrnConf),
    Concat {
        axis: i64,
    },
    Eltwise(EltwiseOp),
    Flatten {
        axis: i64,
        end_axis: i64,
    },
    Reshape {
        dims: Vec<i64>,
        axis: i64,
        num_axes: i64,
    },
    Softmax {
        axis: i64,
    },
    BatchNorm(BatchNormSpec),
    Scale(ScaleConf),
    PRelu {
        channel_shared: bool,
        filler: Filler,
    },
    Power(PowerConf),
    /// Shapes of the tops (one for all, or one per top) and the top count.
    Input {
        shapes: Vec<Shape>,
        tops: usize,
    },
}

impl LayerSpec {
    /// Caffe's type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerSpec::Convolution(_) => "Convolution",
            LayerSpec::Lrn(_) => "LRN",
            LayerSpec::Concat { .. } => "Concat",
            LayerSpec::Eltwise(_) => "Eltwise",
            LayerSpec::Flatten { .. } => "Flatten",
            LayerSpec::Reshape { .. } => "Reshape",
            LayerSpec::Softmax { .. } => "Softmax",
            LayerSpec::BatchNorm(_) => "BatchNorm",
            LayerSpec::Scale(_) => "Scale",
            LayerSpec::PRelu { .. } => "PReLU",
            LayerSpec::Power(_) => "Power",
            LayerSpec::Input { .. } => "Input",
        }
    }

    /// The layer for these bottoms in a TRAIN (`train`) or TEST net.
    pub fn build(&self, bottoms: &[Shape], train: bool) -> Result<Box<dyn Layer>, String> {
        let one = || match bottoms {
            [b] => Ok(b),
            _ => Err(format!("takes 1 bottom blob, has {}", bottoms.len())),
        };
        Ok(match self {
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
            LayerSpec::Scale(c) => {
                match bottoms {
                    [b] => Box::new(Scale::new(c.clone(), b)?),
                    _ => return Err(
                        "the two-bottom form of Scale (scale from a blob) is not supported; learn it with one bottom"
                            .into(),
                    ),
                }
            }
            LayerSpec::PRelu { channel_shared, filler } => {
                Box::new(PRelu::new(*channel_shared, filler.clone(), one()?)?)
            }
            LayerSpec::Power(c) => Box::new(Power::new(*c, one()?)),
            LayerSpec::Input { shapes, tops } => {
                if !bottoms.is_empty() {
                    return Err(format!("takes no bottom blob, has {}", bottoms.len()));
                }
                Box::new(Input::new(shapes, *tops)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::lrn::NormRegion;

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
            let l = spec.build(&bottoms, true).unwrap();
            assert_eq!((l.type_name(), l.top_shapes()), (spec.type_name(), tops), "{spec:?}");
        }
        let err = LayerSpec::Softmax { axis: 1 }.build(&[img.clone(), img.clone()], true).err().unwrap();
        assert!(err.contains("takes 1 bottom"), "{err}");
        assert!(LayerSpec::Scale(ScaleConf::default())
            .build(&[img.clone(), vec![4]], true)
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
            let l = spec.build(std::slice::from_ref(&img), train).unwrap();
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

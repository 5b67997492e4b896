//! Caffe's old V1 layer format (`layers { type: CONVOLUTION blobs_lr: 1
//! weight_decay: 1 ... }`) upgraded to the current `LayerParameter` as
//! Caffe's `UpgradeV1LayerParameter` does: the type enum becomes its type
//! string, `param` names, `blob_share_mode`, `blobs_lr` and `weight_decay`
//! become `param { name share_mode lr_mult decay_mult }` blob by blob, and
//! the wiring, rules, loss weights, blobs and every `*_param` are carried
//! over as they are, but for the transform settings a V1 Data or ImageData
//! layer may give in its own `*_param` (`scale`, `mean_file`, `crop_size`,
//! `mirror`), which move into `transform_param` as Caffe's
//! `UpgradeNetDataTransformation` moves them. It owns that translation; what the upgraded layer
//! means is checked by `net.rs` like any other layer's, and this module
//! must never judge a setting itself.

use crate::proto::caffe::v1_layer_parameter::{DimCheckMode, LayerType};
use crate::proto::caffe::{param_spec, LayerParameter, ParamSpec, TransformationParameter, V1LayerParameter};

/// The type string Caffe's `UpgradeV1LayerType` gives a V1 type; `None`
/// for `NONE`, which names no type.
pub fn type_name(t: LayerType) -> Option<&'static str> {
    Some(match t {
        LayerType::None => return None,
        LayerType::Absval => "AbsVal",
        LayerType::Accuracy => "Accuracy",
        LayerType::Argmax => "ArgMax",
        LayerType::Bnll => "BNLL",
        LayerType::Concat => "Concat",
        LayerType::ContrastiveLoss => "ContrastiveLoss",
        LayerType::Convolution => "Convolution",
        LayerType::Deconvolution => "Deconvolution",
        LayerType::Data => "Data",
        LayerType::Dropout => "Dropout",
        LayerType::DummyData => "DummyData",
        LayerType::EuclideanLoss => "EuclideanLoss",
        LayerType::Eltwise => "Eltwise",
        LayerType::Exp => "Exp",
        LayerType::Flatten => "Flatten",
        LayerType::Hdf5Data => "HDF5Data",
        LayerType::Hdf5Output => "HDF5Output",
        LayerType::HingeLoss => "HingeLoss",
        LayerType::Im2col => "Im2col",
        LayerType::ImageData => "ImageData",
        LayerType::InfogainLoss => "InfogainLoss",
        LayerType::InnerProduct => "InnerProduct",
        LayerType::Lrn => "LRN",
        LayerType::MemoryData => "MemoryData",
        LayerType::MultinomialLogisticLoss => "MultinomialLogisticLoss",
        LayerType::Mvn => "MVN",
        LayerType::Pooling => "Pooling",
        LayerType::Power => "Power",
        LayerType::Relu => "ReLU",
        LayerType::Sigmoid => "Sigmoid",
        LayerType::SigmoidCrossEntropyLoss => "SigmoidCrossEntropyLoss",
        LayerType::Silence => "Silence",
        LayerType::Softmax => "Softmax",
        LayerType::SoftmaxLoss => "SoftmaxWithLoss",
        LayerType::Split => "Split",
        LayerType::Slice => "Slice",
        LayerType::Tanh => "TanH",
        LayerType::WindowData => "WindowData",
        LayerType::Threshold => "Threshold",
    })
}

/// `v1` as a current layer. A type of `NONE` (or none) leaves `type` unset,
/// which the net's checks refuse at the layer's line.
pub fn upgrade(v1: &V1LayerParameter) -> LayerParameter {
    let blobs = v1.param.len().max(v1.blob_share_mode.len()).max(v1.blobs_lr.len()).max(v1.weight_decay.len());
    // Caffe grows `param` to the longest of the four lists; a field a list
    // leaves out keeps ParamSpec's default.
    let param = (0..blobs)
        .map(|i| ParamSpec {
            name: v1.param.get(i).cloned(),
            share_mode: v1.blob_share_mode.get(i).map(|&m| {
                let strict = m == DimCheckMode::Strict as i32;
                (if strict { param_spec::DimCheckMode::Strict } else { param_spec::DimCheckMode::Permissive }) as i32
            }),
            lr_mult: v1.blobs_lr.get(i).copied(),
            decay_mult: v1.weight_decay.get(i).copied(),
        })
        .collect();
    let mut data_param = v1.data_param.clone();
    let mut image_data_param = v1.image_data_param.clone();
    let mut transform_param = v1.transform_param.clone();
    // Caffe moves these for DATA and IMAGE_DATA layers only, each field overriding transform_param's.
    let t = v1.r#type.and_then(|t| LayerType::try_from(t).ok());
    let mut moved = |scale: Option<f32>, mean_file: Option<String>, crop_size: Option<u32>, mirror: Option<bool>| {
        if scale.is_none() && mean_file.is_none() && crop_size.is_none() && mirror.is_none() {
            return;
        }
        let tp = transform_param.get_or_insert_with(TransformationParameter::default);
        tp.scale = scale.or(tp.scale);
        tp.mean_file = mean_file.or(tp.mean_file.take());
        tp.crop_size = crop_size.or(tp.crop_size);
        tp.mirror = mirror.or(tp.mirror);
    };
    match (t, &mut data_param, &mut image_data_param) {
        (Some(LayerType::Data), Some(d), _) => {
            moved(d.scale.take(), d.mean_file.take(), d.crop_size.take(), d.mirror.take());
        }
        (Some(LayerType::ImageData), _, Some(d)) => {
            moved(d.scale.take(), d.mean_file.take(), d.crop_size.take(), d.mirror.take());
        }
        _ => {}
    }
    LayerParameter {
        name: v1.name.clone(),
        r#type: v1.r#type.and_then(|t| LayerType::try_from(t).ok()).and_then(type_name).map(str::to_string),
        bottom: v1.bottom.clone(),
        top: v1.top.clone(),
        loss_weight: v1.loss_weight.clone(),
        param,
        blobs: v1.blobs.clone(),
        include: v1.include.clone(),
        exclude: v1.exclude.clone(),
        transform_param,
        loss_param: v1.loss_param,
        accuracy_param: v1.accuracy_param,
        argmax_param: v1.argmax_param,
        concat_param: v1.concat_param,
        contrastive_loss_param: v1.contrastive_loss_param,
        convolution_param: v1.convolution_param.clone(),
        data_param,
        dropout_param: v1.dropout_param,
        dummy_data_param: v1.dummy_data_param.clone(),
        eltwise_param: v1.eltwise_param.clone(),
        exp_param: v1.exp_param,
        hdf5_data_param: v1.hdf5_data_param.clone(),
        hinge_loss_param: v1.hinge_loss_param,
        image_data_param,
        infogain_loss_param: v1.infogain_loss_param.clone(),
        inner_product_param: v1.inner_product_param.clone(),
        lrn_param: v1.lrn_param,
        memory_data_param: v1.memory_data_param,
        mvn_param: v1.mvn_param,
        pooling_param: v1.pooling_param,
        power_param: v1.power_param,
        relu_param: v1.relu_param,
        sigmoid_param: v1.sigmoid_param,
        softmax_param: v1.softmax_param,
        slice_param: v1.slice_param.clone(),
        tanh_param: v1.tanh_param,
        threshold_param: v1.threshold_param,
        ..LayerParameter::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::caffe::{ConvolutionParameter, NetStateRule, Phase};

    #[test]
    fn lists_become_param_blocks_and_settings_carry_over() {
        let conv = ConvolutionParameter { num_output: Some(32), ..Default::default() };
        let v1 = V1LayerParameter {
            name: Some("conv1".into()),
            r#type: Some(LayerType::Convolution as i32),
            bottom: vec!["data".into()],
            top: vec!["conv1".into()],
            include: vec![NetStateRule { phase: Some(Phase::Train as i32), ..Default::default() }],
            param: vec!["w".into()],
            blob_share_mode: vec![DimCheckMode::Permissive as i32],
            blobs_lr: vec![1.0, 2.0],
            weight_decay: vec![1.0, 0.0],
            convolution_param: Some(conv.clone()),
            ..Default::default()
        };
        let l = upgrade(&v1);
        assert_eq!(
            (l.name(), l.r#type(), &l.bottom[..], &l.top[..]),
            ("conv1", "Convolution", &v1.bottom[..], &v1.top[..])
        );
        assert_eq!(l.include, v1.include);
        assert_eq!(l.convolution_param, Some(conv));
        let permissive = param_spec::DimCheckMode::Permissive as i32;
        assert_eq!(
            l.param,
            [
                ParamSpec {
                    name: Some("w".into()),
                    share_mode: Some(permissive),
                    lr_mult: Some(1.0),
                    decay_mult: Some(1.0)
                },
                ParamSpec { name: None, share_mode: None, lr_mult: Some(2.0), decay_mult: Some(0.0) },
            ]
        );
    }

    #[test]
    fn a_data_layers_own_transform_fields_move_into_transform_param() {
        use crate::proto::caffe::DataParameter;
        let v1 = V1LayerParameter {
            r#type: Some(LayerType::Data as i32),
            data_param: Some(DataParameter {
                source: Some("db".into()),
                scale: Some(0.5),
                mirror: Some(true),
                ..Default::default()
            }),
            transform_param: Some(TransformationParameter {
                crop_size: Some(3),
                scale: Some(2.0),
                ..Default::default()
            }),
            ..Default::default()
        };
        let l = upgrade(&v1);
        let d = l.data_param.unwrap();
        assert_eq!((d.source(), d.scale, d.mirror), ("db", None, None));
        let t = l.transform_param.unwrap();
        assert_eq!((t.scale, t.mirror, t.crop_size), (Some(0.5), Some(true), Some(3)));
        // Another type's fields stay where they are (and are judged there).
        let other = V1LayerParameter { r#type: Some(LayerType::Convolution as i32), ..v1 };
        assert_eq!(upgrade(&other).data_param.unwrap().scale, Some(0.5));
    }

    #[test]
    fn every_type_has_caffes_name_and_none_has_none() {
        assert_eq!(type_name(LayerType::SoftmaxLoss), Some("SoftmaxWithLoss"));
        assert_eq!(type_name(LayerType::Hdf5Data), Some("HDF5Data"));
        assert_eq!(type_name(LayerType::Tanh), Some("TanH"));
        assert_eq!(type_name(LayerType::None), None);
        let none = upgrade(&V1LayerParameter { r#type: Some(0), ..Default::default() });
        assert_eq!(none.r#type, None);
        // Without lists there are no param blocks, as Caffe leaves them.
        assert!(none.param.is_empty());
    }
}

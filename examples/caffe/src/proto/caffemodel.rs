//! The `.caffemodel` weights file: a binary `NetParameter` whose layers
//! carry their name, type and parameter blobs, as Caffe writes it, so
//! weights move between Caffe and this trainer. It owns the conversion
//! between those messages and plain (shape, values) blobs; it must never
//! interpret a blob (matching names and shapes is `params.rs`'s job).

use prost::Message;

use crate::proto::caffe::{BlobProto, BlobShape, LayerParameter, NetParameter};
use crate::proto::v1_upgrade;

/// One layer's parameter blobs.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerBlobs {
    pub name: String,
    pub type_name: String,
    /// (shape, data) per blob: weights, then bias.
    pub blobs: Vec<(Vec<usize>, Vec<f32>)>,
}

/// A blob as Caffe stores it.
pub fn blob_proto(shape: &[usize], data: &[f32]) -> BlobProto {
    BlobProto {
        shape: Some(BlobShape { dim: shape.iter().map(|&d| d as i64).collect() }),
        data: data.to_vec(),
        ..Default::default()
    }
}

/// A stored blob's shape and values (old files give num/channels/height/width
/// instead of a shape; double-precision files give `double_data`).
pub fn blob_values(b: &BlobProto) -> Result<(Vec<usize>, Vec<f32>), String> {
    let shape = match &b.shape {
        Some(s) => s
            .dim
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("a blob has a negative dimension {d}")))
            .collect::<Result<Vec<_>, _>>()?,
        None if b.num.is_some() || b.channels.is_some() || b.height.is_some() || b.width.is_some() => {
            [b.num, b.channels, b.height, b.width]
                .iter()
                .map(|d| usize::try_from(d.unwrap_or(1)).map_err(|_| "a blob has a negative dimension".to_string()))
                .collect::<Result<Vec<_>, _>>()?
        }
        None => Vec::new(),
    };
    let data = if b.data.is_empty() && !b.double_data.is_empty() {
        b.double_data.iter().map(|&v| v as f32).collect()
    } else {
        b.data.clone()
    };
    Ok((shape, data))
}

/// Encodes a weights file.
pub fn encode(net_name: &str, layers: &[LayerBlobs]) -> Vec<u8> {
    NetParameter {
        name: Some(net_name.to_string()),
        layer: layers
            .iter()
            .map(|l| LayerParameter {
                name: Some(l.name.clone()),
                r#type: Some(l.type_name.clone()),
                blobs: l.blobs.iter().map(|(s, d)| blob_proto(s, d)).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Field 2 of NetParameter (Caffe's V1 `layers`) and field 1 of a V1 layer
/// (the V0 `layer` inside it), which caffe.proto leaves undeclared.
const V1_LAYERS: u32 = 2;
const V0_LAYER: u32 = 1;

/// Whether a V1 layer of a binary NetParameter holds a V0 `layer`.
fn has_v0_layer(mut bytes: &[u8]) -> Result<bool, String> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    while !bytes.is_empty() {
        let (tag, wire) = decode_key(&mut bytes).map_err(|e| e.to_string())?;
        if tag == V1_LAYERS && wire == WireType::LengthDelimited {
            let len = decode_varint(&mut bytes).map_err(|e| e.to_string())? as usize;
            let Some((mut inner, rest)) = (len <= bytes.len()).then(|| bytes.split_at(len)) else {
                return Err("a V1 layer runs past the end of the file".into());
            };
            while !inner.is_empty() {
                let (t, w) = decode_key(&mut inner).map_err(|e| e.to_string())?;
                if t == V0_LAYER {
                    return Ok(true);
                }
                skip_field(w, t, &mut inner, DecodeContext::default()).map_err(|e| e.to_string())?;
            }
            bytes = rest;
            continue;
        }
        skip_field(wire, tag, &mut bytes, DecodeContext::default()).map_err(|e| e.to_string())?;
    }
    Ok(false)
}

/// Decodes a weights file into its layers that have blobs. A file in
/// Caffe's V1 format has its layers' types upgraded as Caffe does.
pub fn decode(bytes: &[u8]) -> Result<Vec<LayerBlobs>, String> {
    let net = NetParameter::decode(bytes).map_err(|e| e.to_string())?;
    if !net.layers.is_empty() {
        if !net.layer.is_empty() {
            return Err("this weights file holds both `layer` and Caffe's V1 `layers`; write it one way".into());
        }
        if has_v0_layer(bytes)? {
            return Err("this weights file uses Caffe's V0 layer format, which caffe-geeps does not read; upgrade \
                        it with Caffe's upgrade_net_proto_binary"
                .into());
        }
    }
    let upgraded: Vec<LayerParameter> = net.layers.iter().map(v1_upgrade::upgrade).collect();
    let mut layers = Vec::new();
    for l in net.layer.iter().chain(&upgraded).filter(|l| !l.blobs.is_empty()) {
        let blobs = l.blobs.iter().map(blob_values).collect::<Result<Vec<_>, _>>()?;
        layers.push(LayerBlobs { name: l.name().to_string(), type_name: l.r#type().to_string(), blobs });
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let layers = vec![
            LayerBlobs {
                name: "conv1".into(),
                type_name: "Convolution".into(),
                blobs: vec![(vec![2, 1, 3, 3], (0..18).map(|i| i as f32 * 0.5).collect()), (vec![2], vec![1.0, -2.0])],
            },
            LayerBlobs {
                name: "ip".into(),
                type_name: "InnerProduct".into(),
                blobs: vec![(vec![300], vec![3.0; 300])],
            },
        ];
        let bytes = encode("net", &layers);
        assert_eq!(decode(&bytes).unwrap(), layers);
    }

    #[test]
    fn truncated_and_old_files_are_errors() {
        let layers = vec![LayerBlobs { name: "a".into(), type_name: "B".into(), blobs: vec![(vec![4], vec![1.0; 4])] }];
        let bytes = encode("n", &layers);
        assert!(decode(&bytes[..bytes.len() - 3]).is_err());
        // A V1 `layers` entry holding a V0 `layer` (field 1, empty).
        let e = decode(&[0x12, 0x02, 0x0a, 0x00]).unwrap_err();
        assert!(e.contains("V0"), "{e}");
    }

    #[test]
    fn v1_weights_are_upgraded() {
        use crate::proto::caffe::v1_layer_parameter::LayerType;
        use crate::proto::caffe::V1LayerParameter;
        let v1 = |name: &str, t: LayerType, blobs: Vec<BlobProto>| V1LayerParameter {
            name: Some(name.into()),
            r#type: Some(t as i32),
            blobs,
            ..Default::default()
        };
        let net = NetParameter {
            layers: vec![
                v1(
                    "conv1",
                    LayerType::Convolution,
                    vec![blob_proto(&[2, 1, 1, 1], &[1.0, 2.0]), blob_proto(&[2], &[0.5; 2])],
                ),
                v1("relu1", LayerType::Relu, vec![]),
                v1("ip", LayerType::InnerProduct, vec![blob_proto(&[1, 2], &[3.0, 4.0])]),
            ],
            ..Default::default()
        };
        let got = decode(&net.encode_to_vec()).unwrap();
        assert_eq!(
            got.iter().map(|l| (l.name.as_str(), l.type_name.as_str())).collect::<Vec<_>>(),
            [("conv1", "Convolution"), ("ip", "InnerProduct")]
        );
        assert_eq!(got[0].blobs, [(vec![2, 1, 1, 1], vec![1.0, 2.0]), (vec![2], vec![0.5; 2])]);
        let mixed = NetParameter { layer: vec![LayerParameter::default()], ..net };
        assert!(decode(&mixed.encode_to_vec()).unwrap_err().contains("both"));
    }

    #[test]
    fn old_4d_shapes_are_read() {
        let b = BlobProto { num: Some(2), channels: Some(3), data: vec![0.0; 6], ..Default::default() };
        assert_eq!(blob_values(&b).unwrap(), (vec![2, 3, 1, 1], vec![0.0; 6]));
    }
}

//! The `.caffemodel` weights file: a binary `NetParameter` whose layers
//! carry their name, type and parameter blobs, as Caffe writes it, so
//! weights move between Caffe and this trainer. It owns the conversion
//! between those messages and plain (shape, values) blobs; it must never
//! interpret a blob (matching names and shapes is `params.rs`'s job).

use prost::Message;

use crate::proto::caffe::{BlobProto, BlobShape, LayerParameter, NetParameter};

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

/// Field 2 of NetParameter: Caffe's old V1 layers, which caffe.proto leaves out.
const V1_LAYERS: u32 = 2;

/// Whether a binary NetParameter has top-level field `number`.
fn has_field(mut bytes: &[u8], number: u32) -> Result<bool, String> {
    use prost::encoding::{decode_key, skip_field, DecodeContext};
    while !bytes.is_empty() {
        let (tag, wire) = decode_key(&mut bytes).map_err(|e| e.to_string())?;
        if tag == number {
            return Ok(true);
        }
        skip_field(wire, tag, &mut bytes, DecodeContext::default()).map_err(|e| e.to_string())?;
    }
    Ok(false)
}

/// Decodes a weights file into its layers that have blobs.
pub fn decode(bytes: &[u8]) -> Result<Vec<LayerBlobs>, String> {
    let net = NetParameter::decode(bytes).map_err(|e| e.to_string())?;
    if net.layer.is_empty() && has_field(bytes, V1_LAYERS)? {
        return Err("this weights file uses Caffe's old V1 layer format; upgrade it with Caffe's \
                    upgrade_net_proto_binary"
            .into());
    }
    let mut layers = Vec::new();
    for l in net.layer.iter().filter(|l| !l.blobs.is_empty()) {
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
        // A V1 `layers` entry (field 2, length-delimited, empty).
        let e = decode(&[0x12, 0x00]).unwrap_err();
        assert!(e.contains("V1"), "{e}");
    }

    #[test]
    fn old_4d_shapes_are_read() {
        let b = BlobProto { num: Some(2), channels: Some(3), data: vec![0.0; 6], ..Default::default() };
        assert_eq!(blob_values(&b).unwrap(), (vec![2, 3, 1, 1], vec![0.0; 6]));
    }
}

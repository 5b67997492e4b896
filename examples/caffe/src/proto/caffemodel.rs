//! The `.caffemodel` weights file: a binary protobuf `NetParameter` whose
//! layers carry only their name, type and parameter blobs (shape + float
//! data), as Caffe writes it, so weights move between Caffe and this trainer.
//! It owns the wire encoding of those few fields; it must never interpret a
//! blob (matching names and shapes is `params.rs`'s job).

/// One layer's parameter blobs.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerBlobs {
    pub name: String,
    pub type_name: String,
    /// (shape, data) per blob: weights, then bias.
    pub blobs: Vec<(Vec<usize>, Vec<f32>)>,
}

// Field numbers of caffe.proto.
const NET_NAME: u32 = 1;
const NET_LAYER: u32 = 100;
const NET_V1_LAYERS: u32 = 2;
const LAYER_NAME: u32 = 1;
const LAYER_TYPE: u32 = 2;
const LAYER_BLOBS: u32 = 7;
const BLOB_DATA: u32 = 5;
const BLOB_SHAPE: u32 = 7;
// Old files give num, channels, height, width as fields 1 to 4.
const BLOB_NUM: u32 = 1;
const BLOB_WIDTH: u32 = 4;
const SHAPE_DIM: u32 = 1;

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const FIXED32: u32 = 5;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(out, u64::from(field << 3 | wire));
}

fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encodes a weights file.
pub fn encode(net_name: &str, layers: &[LayerBlobs]) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, NET_NAME, net_name.as_bytes());
    for l in layers {
        let mut layer = Vec::new();
        put_bytes(&mut layer, LAYER_NAME, l.name.as_bytes());
        put_bytes(&mut layer, LAYER_TYPE, l.type_name.as_bytes());
        for (shape, data) in &l.blobs {
            let mut dims = Vec::new();
            for &d in shape {
                put_varint(&mut dims, d as u64);
            }
            let mut shape_msg = Vec::new();
            put_bytes(&mut shape_msg, SHAPE_DIM, &dims);
            let mut blob = Vec::new();
            put_bytes(&mut blob, BLOB_SHAPE, &shape_msg);
            let floats: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            put_bytes(&mut blob, BLOB_DATA, &floats);
            put_bytes(&mut layer, LAYER_BLOBS, &blob);
        }
        put_bytes(&mut out, NET_LAYER, &layer);
    }
    out
}

/// A field read off the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
    Fixed64,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len()).ok_or("truncated field")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn next(&mut self) -> Result<Option<(u32, Wire<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (field, wire) = ((key >> 3) as u32, (key & 7) as u32);
        let value = match wire {
            VARINT => Wire::Varint(self.varint()?),
            LEN => {
                let n = self.varint()? as usize;
                Wire::Bytes(self.take(n)?)
            }
            FIXED32 => Wire::Fixed32(self.take(4)?.try_into().expect("4 bytes")),
            FIXED64 => {
                self.take(8)?;
                Wire::Fixed64
            }
            w => return Err(format!("wire type {w} of field {field} is not protobuf")),
        };
        Ok(Some((field, value)))
    }
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a name is not UTF-8".to_string())
}

fn blob(buf: &[u8]) -> Result<(Vec<usize>, Vec<f32>), String> {
    let mut r = Reader::new(buf);
    let (mut shape, mut legacy, mut data) = (Vec::new(), [None; 4], Vec::new());
    while let Some((field, w)) = r.next()? {
        match (field, w) {
            (BLOB_SHAPE, Wire::Bytes(b)) => {
                let mut s = Reader::new(b);
                while let Some((f, w)) = s.next()? {
                    match (f, w) {
                        (SHAPE_DIM, Wire::Bytes(packed)) => {
                            let mut p = Reader::new(packed);
                            while p.pos < packed.len() {
                                shape.push(p.varint()? as usize);
                            }
                        }
                        (SHAPE_DIM, Wire::Varint(d)) => shape.push(d as usize),
                        _ => {}
                    }
                }
            }
            (BLOB_DATA, Wire::Bytes(b)) => {
                if b.len() % 4 != 0 {
                    return Err("packed float data is not a multiple of 4 bytes".into());
                }
                data.extend(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
            }
            (BLOB_DATA, Wire::Fixed32(b)) => data.push(f32::from_le_bytes(b)),
            (f @ BLOB_NUM..=BLOB_WIDTH, Wire::Varint(v)) => legacy[(f - BLOB_NUM) as usize] = Some(v as usize),
            _ => {}
        }
    }
    if shape.is_empty() && legacy.iter().any(Option::is_some) {
        // Old files give num/channels/height/width instead of a shape.
        shape = legacy.iter().map(|d| d.unwrap_or(1)).collect();
    }
    Ok((shape, data))
}

/// Decodes a weights file into its layers that have blobs.
pub fn decode(bytes: &[u8]) -> Result<Vec<LayerBlobs>, String> {
    let mut r = Reader::new(bytes);
    let mut layers = Vec::new();
    while let Some((field, w)) = r.next()? {
        match (field, w) {
            (NET_LAYER, Wire::Bytes(b)) => {
                let mut l = Reader::new(b);
                let mut layer = LayerBlobs { name: String::new(), type_name: String::new(), blobs: Vec::new() };
                while let Some((f, w)) = l.next()? {
                    match (f, w) {
                        (LAYER_NAME, Wire::Bytes(s)) => layer.name = utf8(s)?,
                        (LAYER_TYPE, Wire::Bytes(s)) => layer.type_name = utf8(s)?,
                        (LAYER_BLOBS, Wire::Bytes(s)) => layer.blobs.push(blob(s)?),
                        _ => {}
                    }
                }
                if !layer.blobs.is_empty() {
                    layers.push(layer);
                }
            }
            (NET_V1_LAYERS, Wire::Bytes(_)) => {
                return Err("this weights file uses Caffe's old V1 layer format; upgrade it with Caffe's \
                            upgrade_net_proto_binary"
                    .into())
            }
            (_, Wire::Varint(_) | Wire::Bytes(_) | Wire::Fixed32(_) | Wire::Fixed64) => {}
        }
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
    fn truncated_files_are_errors() {
        let layers = vec![LayerBlobs { name: "a".into(), type_name: "B".into(), blobs: vec![(vec![4], vec![1.0; 4])] }];
        let bytes = encode("n", &layers);
        assert!(decode(&bytes[..bytes.len() - 3]).is_err());
    }
}

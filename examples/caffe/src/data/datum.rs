//! The records of Caffe's databases and mean files: `Datum` (one image,
//! raw bytes, floats or an encoded JPEG/PNG, with its label) and `BlobProto`
//! (a mean image), the types generated from `caffe.proto`. It owns
//! turning records into C×H×W images and back; it must never touch a
//! database or a transform.

use prost::Message;

use crate::error::{Error, Result};

pub use crate::proto::caffe::{BlobProto, BlobShape, Datum};

/// An image's values as a record holds them.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    Bytes(Vec<u8>),
    Floats(Vec<f32>),
}

/// A decoded record: C×H×W values (channels in Caffe's BGR order for colour) and a label.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub values: Values,
    pub label: i32,
}

impl Image {
    /// The record Caffe's converters write: raw bytes, not encoded.
    pub fn to_datum_bytes(&self) -> Vec<u8> {
        let (data, float_data) = match &self.values {
            Values::Bytes(b) => (Some(b.clone()), Vec::new()),
            Values::Floats(f) => (None, f.clone()),
        };
        Datum {
            channels: Some(self.channels as i32),
            height: Some(self.height as i32),
            width: Some(self.width as i32),
            data,
            label: Some(self.label),
            float_data,
            encoded: None,
        }
        .encode_to_vec()
    }

    /// Decodes a `Datum` record: `data` bytes, `float_data`, or an encoded image.
    pub fn from_datum_bytes(bytes: &[u8]) -> Result<Image, String> {
        let d = Datum::decode(bytes).map_err(|e| format!("a record is not a Datum: {e}"))?;
        let label = d.label.unwrap_or(0);
        if d.encoded.unwrap_or(false) {
            let data = d.data.unwrap_or_default();
            let img = image::load_from_memory(&data).map_err(|e| format!("an encoded record does not decode: {e}"))?;
            return Ok(from_picture(img, false, label));
        }
        let (c, h, w) = (d.channels.unwrap_or(0), d.height.unwrap_or(0), d.width.unwrap_or(0));
        if c <= 0 || h <= 0 || w <= 0 {
            return Err(format!("a record has shape {c}x{h}x{w}; channels, height and width must be positive"));
        }
        let (c, h, w) = (c as usize, h as usize, w as usize);
        let values = match d.data.filter(|b| !b.is_empty()) {
            Some(b) => Values::Bytes(b),
            None => Values::Floats(d.float_data),
        };
        let n = match &values {
            Values::Bytes(b) => b.len(),
            Values::Floats(f) => f.len(),
        };
        if n != c * h * w {
            return Err(format!("a {c}x{h}x{w} record holds {n} values"));
        }
        Ok(Image { channels: c, height: h, width: w, values, label })
    }
}

/// A picture as Caffe's `CVMatToDatum` stores it: C×H×W, colour in BGR order.
pub fn from_picture(img: image::DynamicImage, gray: bool, label: i32) -> Image {
    let (w, h) = (img.width() as usize, img.height() as usize);
    if gray {
        let g = img.to_luma8();
        return Image { channels: 1, height: h, width: w, values: Values::Bytes(g.into_raw()), label };
    }
    let rgb = img.to_rgb8();
    let mut out = vec![0u8; 3 * h * w];
    for (i, p) in rgb.pixels().enumerate() {
        for (c, v) in [p[2], p[1], p[0]].into_iter().enumerate() {
            out[c * h * w + i] = v;
        }
    }
    Image { channels: 3, height: h, width: w, values: Values::Bytes(out), label }
}

/// Writes a mean image as Caffe's `.binaryproto` (a 1×C×H×W `BlobProto`).
pub fn encode_mean(channels: usize, height: usize, width: usize, values: &[f32]) -> Vec<u8> {
    BlobProto {
        num: Some(1),
        channels: Some(channels as i32),
        height: Some(height as i32),
        width: Some(width as i32),
        data: values.to_vec(),
        shape: Some(BlobShape { dim: vec![1, channels as i64, height as i64, width as i64] }),
        ..BlobProto::default()
    }
    .encode_to_vec()
}

/// Reads a `.binaryproto` mean: (channels, height, width, values).
pub fn decode_mean(bytes: &[u8], path: &std::path::Path) -> Result<(usize, usize, usize, Vec<f32>)> {
    let b = BlobProto::decode(bytes).map_err(|e| Error::file(path, format!("not a BlobProto mean file: {e}")))?;
    let dims: Vec<i64> = match &b.shape {
        Some(s) if !s.dim.is_empty() => s.dim.clone(),
        _ => [b.num, b.channels, b.height, b.width].iter().map(|d| i64::from(d.unwrap_or(1))).collect(),
    };
    // Leading 1s (num) aside, a mean is C×H×W.
    let chw: Vec<usize> = match dims.iter().skip_while(|d| **d == 1).count() {
        0..=3 => {
            let mut v: Vec<usize> = dims.iter().map(|d| (*d).max(1) as usize).collect();
            while v.len() > 3 {
                v.remove(0);
            }
            while v.len() < 3 {
                v.insert(0, 1);
            }
            v
        }
        _ => return Err(Error::file(path, format!("a mean must be 1xCxHxW, this one is {dims:?}"))),
    };
    if b.data.len() != chw.iter().product::<usize>() {
        return Err(Error::file(path, format!("a {dims:?} mean holds {} values", b.data.len())));
    }
    Ok((chw[0], chw[1], chw[2], b.data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datums_round_trip_and_bad_ones_are_named() {
        let img = Image { channels: 1, height: 2, width: 2, values: Values::Bytes(vec![1, 2, 3, 4]), label: 7 };
        assert_eq!(Image::from_datum_bytes(&img.to_datum_bytes()).unwrap(), img);
        let f = Image { channels: 2, height: 1, width: 1, values: Values::Floats(vec![0.5, -1.0]), label: 1 };
        assert_eq!(Image::from_datum_bytes(&f.to_datum_bytes()).unwrap(), f);
        let short =
            Datum { channels: Some(1), height: Some(2), width: Some(2), data: Some(vec![1]), ..Datum::default() };
        assert!(Image::from_datum_bytes(&short.encode_to_vec()).unwrap_err().contains("holds 1 values"));
        assert!(Image::from_datum_bytes(&[0xff, 0xff]).unwrap_err().contains("not a Datum"));
    }

    #[test]
    fn encoded_pictures_decode_in_bgr_order() {
        let mut png = Vec::new();
        let pic = image::RgbImage::from_fn(2, 1, |x, _| image::Rgb([10 + x as u8, 20, 30]));
        image::DynamicImage::ImageRgb8(pic)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let d = Datum { data: Some(png), label: Some(3), encoded: Some(true), ..Datum::default() };
        let img = Image::from_datum_bytes(&d.encode_to_vec()).unwrap();
        assert_eq!((img.channels, img.height, img.width, img.label), (3, 1, 2, 3));
        assert_eq!(img.values, Values::Bytes(vec![30, 30, 20, 20, 10, 11]));
    }

    #[test]
    fn means_round_trip() {
        let p = std::path::Path::new("mean.binaryproto");
        let bytes = encode_mean(3, 1, 2, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(decode_mean(&bytes, p).unwrap(), (3, 1, 2, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        let old = BlobProto {
            num: Some(1),
            channels: Some(1),
            height: Some(1),
            width: Some(2),
            data: vec![1.0, 2.0],
            ..BlobProto::default()
        };
        assert_eq!(decode_mean(&old.encode_to_vec(), p).unwrap(), (1, 1, 2, vec![1.0, 2.0]));
        let bad =
            BlobProto { data: vec![1.0], shape: Some(BlobShape { dim: vec![1, 1, 2, 2] }), ..BlobProto::default() };
        assert!(decode_mean(&bad.encode_to_vec(), p).unwrap_err().to_string().contains("holds 1 values"));
    }
}

//! Convolution's data movement (`layers/im2col/im2col.cu`) in
//! native Rust: `im2col` writes each receptive field's value (0 outside the
//! image) into the column matrix, `col2im` gathers, per image pixel in its
//! grid-stride order, the columns that read it onto the pixel's value with
//! the CUDA code's single f32 adds in its loop order (ki, then kj). Only for
//! geometry where the CUDA int arithmetic cannot overflow or divide by
//! zero (`sane`); anything else stays interpreted. Must never change the
//! order of the adds.

use super::view::{for_each, Args, Fault, Memory};

/// channels, height, width, kh, kw, pad_h, pad_w, sh, sw, dil_h, dil_w, out_h, out_w.
#[derive(Clone, Copy)]
pub struct Geometry {
    channels: i64,
    height: i64,
    width: i64,
    kh: i64,
    kw: i64,
    pad_h: i64,
    pad_w: i64,
    sh: i64,
    sw: i64,
    dil_h: i64,
    dil_w: i64,
    out_h: i64,
    out_w: i64,
}

const INT: i64 = i32::MAX as i64;

impl Geometry {
    pub fn read(a: &Args, first: usize) -> Geometry {
        let v = |k: usize| a.i32(first + k) as i64;
        Geometry {
            channels: v(0),
            height: v(1),
            width: v(2),
            kh: v(3),
            kw: v(4),
            pad_h: v(5),
            pad_w: v(6),
            sh: v(7),
            sw: v(8),
            dil_h: v(9),
            dil_w: v(10),
            out_h: v(11),
            out_w: v(12),
        }
    }

    /// Whether every int expression of both kernels stays in range and no divisor is 0.
    pub fn sane(&self) -> bool {
        let g = self;
        let non_negative = [g.channels, g.height, g.width, g.pad_h, g.pad_w, g.out_h, g.out_w].iter().all(|&v| v >= 0);
        let positive = [g.kh, g.kw, g.sh, g.sw, g.dil_h, g.dil_w].iter().all(|&v| v >= 1);
        non_negative
            && positive
            && g.channels * g.kh * g.kw * g.out_h.max(1) * g.out_w.max(1) <= INT
            && g.channels * g.height.max(1) * g.width.max(1) <= INT
            && g.out_h * g.sh + g.kh * g.dil_h + g.height + 2 * g.pad_h <= INT
            && g.out_w * g.sw + g.kw * g.dil_w + g.width + 2 * g.pad_w <= INT
            && g.height >= 1
            && g.width >= 1
    }

    pub fn columns(&self) -> u32 {
        (self.channels * self.kh * self.kw * self.out_h * self.out_w) as u32
    }

    pub fn pixels(&self) -> u32 {
        (self.channels * self.height * self.width) as u32
    }
}

/// `im2col(image, col, ld, geometry)`.
pub fn im2col(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 3);
    let ld = a.u32(2) as u64;
    for_each(g.columns(), |i| {
        let i = i as i64;
        let (ow, oh) = (i % g.out_w, (i / g.out_w) % g.out_h);
        let row = i / (g.out_w * g.out_h);
        let (kj, ki, c) = (row % g.kw, (row / g.kw) % g.kh, row / (g.kw * g.kh));
        let h = oh * g.sh - g.pad_h + ki * g.dil_h;
        let w = ow * g.sw - g.pad_w + kj * g.dil_w;
        let v = if h >= 0 && h < g.height && w >= 0 && w < g.width {
            m.f32(0, ((c * g.height + h) * g.width + w) as u64)?
        } else {
            0.0
        };
        m.set_f32(1, row as u64 * ld + (oh * g.out_w + ow) as u64, v)
    })
}

/// `col2im(col, ld, image, geometry)`.
pub fn col2im(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 3);
    let ld = a.u32(1) as u64;
    for_each(g.pixels(), |i| {
        let at = i;
        let i = i as i64;
        let (w, h, c) = (i % g.width, (i / g.width) % g.height, i / (g.width * g.height));
        let mut v = m.f32(2, at)?;
        for ki in 0..g.kh {
            let hh = h + g.pad_h - ki * g.dil_h;
            if hh < 0 || hh % g.sh != 0 || hh / g.sh >= g.out_h {
                continue;
            }
            let oh = hh / g.sh;
            for kj in 0..g.kw {
                let ww = w + g.pad_w - kj * g.dil_w;
                if ww < 0 || ww % g.sw != 0 || ww / g.sw >= g.out_w {
                    continue;
                }
                let ow = ww / g.sw;
                let row = ((c * g.kh + ki) * g.kw + kj) as u64;
                v += m.f32(0, row * ld + (oh * g.out_w + ow) as u64)?;
            }
        }
        m.set_f32(2, at, v)
    })
}

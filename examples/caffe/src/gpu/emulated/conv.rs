//! Convolution's data movement (`layers/im2col/im2col.cu`) in
//! native Rust, for a run of images: `im2col` writes each receptive field's
//! value (0 outside the image) into the column matrix, `col2im` gathers, per
//! image pixel in its grid-stride order, the columns that read it onto the
//! pixel's value with the CUDA code's single f32 adds in its loop order (ki,
//! then kj), and `swap_outer` swaps an array's two outer dimensions. Only
//! for geometry where the CUDA int and unsigned arithmetic cannot overflow
//! or divide by zero (`sane`); anything else stays interpreted. Must never
//! change the order of the adds.

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

    /// Threads of `im2col` over `count` images; None past the kernel's 32-bit count.
    pub fn columns(&self, count: u32) -> Option<u32> {
        u32::try_from(self.channels * self.kh * self.kw * self.out_h * self.out_w * count as i64).ok()
    }

    /// Threads of `col2im` over `count` images; None past the kernel's 32-bit count.
    pub fn pixels(&self, count: u32) -> Option<u32> {
        u32::try_from(self.channels * self.height * self.width * count as i64).ok()
    }
}

/// The run arguments both kernels take after their two pointers: image stride, ld, count.
fn run(a: &Args, image_stride: usize, ld: usize) -> (u64, u64, i64) {
    (a.u32(image_stride) as u64, a.u32(ld) as u64, a.u32(4) as i64)
}

/// `im2col(images, image_stride, col, ld, count, geometry)`.
pub fn im2col(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 5);
    let (image_stride, ld, count) = run(a, 1, 3);
    let cols = g.out_h * g.out_w;
    let Some(n) = g.columns(count as u32) else { return Ok(()) };
    for_each(n, |i| {
        let i = i as i64;
        let (pixel, image, row) = (i % cols, (i / cols) % count, i / (cols * count));
        let (ow, oh) = (pixel % g.out_w, pixel / g.out_w);
        let (kj, ki, c) = (row % g.kw, (row / g.kw) % g.kh, row / (g.kw * g.kh));
        let h = oh * g.sh - g.pad_h + ki * g.dil_h;
        let w = ow * g.sw - g.pad_w + kj * g.dil_w;
        let v = if h >= 0 && h < g.height && w >= 0 && w < g.width {
            m.f32(0, image as u64 * image_stride + ((c * g.height + h) * g.width + w) as u64)?
        } else {
            0.0
        };
        m.set_f32(2, row as u64 * ld + (image * cols + pixel) as u64, v)
    })
}

/// `col2im(col, ld, images, image_stride, count, geometry)`.
pub fn col2im(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 5);
    let (image_stride, ld, count) = run(a, 3, 1);
    let (plane, cols) = (g.channels * g.height * g.width, g.out_h * g.out_w);
    let Some(n) = g.pixels(count as u32) else { return Ok(()) };
    for_each(n, |i| {
        let i = i as i64;
        let (image, p) = (i / plane, i % plane);
        let (w, h, c) = (p % g.width, (p / g.width) % g.height, p / (g.width * g.height));
        let at = image as u64 * image_stride + p as u64;
        let base = (image * cols) as u64;
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
                v += m.f32(0, base + row * ld + (oh * g.out_w + ow) as u64)?;
            }
        }
        m.set_f32(2, at, v)
    })
}

/// `swap_outer(src, dst, a, b, inner)`: dst\[j\]\[i\]\[k\] = src\[i\]\[j\]\[k\].
pub fn swap_outer(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let (outer, b, inner) = (a.u32(2), a.u32(3), a.u32(4));
    for_each(outer.wrapping_mul(b).wrapping_mul(inner), |t| {
        let (k, i, j) = (t % inner as u64, (t / inner as u64) % outer as u64, t / (inner as u64 * outer as u64));
        m.set_f32(1, t, m.f32(0, (i * b as u64 + j) * inner as u64 + k)?)
    })
}

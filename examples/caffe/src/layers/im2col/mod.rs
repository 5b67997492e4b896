//! im2col and col2im for one image (Caffe's layout): a C×H×W image becomes a
//! (C·kh·kw) × (OH·OW) matrix so a convolution is one GEMM; kernel taps are
//! `dilation` pixels apart. It owns the index arithmetic and zero padding;
//! it must never allocate.

/// Geometry of a 2-D convolution or pooling window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub pad: (usize, usize),
    /// Distance between kernel taps (1: adjacent).
    pub dilation: (usize, usize),
    pub out_h: usize,
    pub out_w: usize,
}

impl Geometry {
    /// Rows of the column matrix.
    pub fn col_rows(&self) -> usize {
        self.channels * self.kernel.0 * self.kernel.1
    }

    /// Columns of the column matrix (output pixels).
    pub fn col_cols(&self) -> usize {
        self.out_h * self.out_w
    }

    /// A 1×1 kernel with stride 1 and no pad: the image is its own column matrix.
    pub fn is_identity(&self) -> bool {
        self.kernel == (1, 1) && self.stride == (1, 1) && self.pad == (0, 0) && self.dilation == (1, 1)
    }
}

/// Writes the column matrix of `image` into `col`, whose rows are `ld`
/// floats apart (`ld` > the image's column count when several images share
/// one matrix side by side).
pub fn im2col(g: &Geometry, image: &[f32], col: &mut [f32], ld: usize) {
    let (kh, kw) = g.kernel;
    let cols = g.col_cols();
    for c in 0..g.channels {
        let plane = &image[c * g.height * g.width..(c + 1) * g.height * g.width];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &mut col[((c * kh + ki) * kw + kj) * ld..][..cols];
                for oh in 0..g.out_h {
                    let h = (oh * g.stride.0 + ki * g.dilation.0) as isize - g.pad.0 as isize;
                    let out = &mut row[oh * g.out_w..(oh + 1) * g.out_w];
                    if h < 0 || h >= g.height as isize {
                        out.fill(0.0);
                        continue;
                    }
                    let src = &plane[h as usize * g.width..(h as usize + 1) * g.width];
                    if g.stride.1 == 1 && g.pad.1 == 0 {
                        // The common case: a contiguous run of the row.
                        out.copy_from_slice(&src[kj * g.dilation.1..kj * g.dilation.1 + g.out_w]);
                        continue;
                    }
                    for (ow, o) in out.iter_mut().enumerate() {
                        let w = (ow * g.stride.1 + kj * g.dilation.1) as isize - g.pad.1 as isize;
                        *o = if w < 0 || w >= g.width as isize { 0.0 } else { src[w as usize] };
                    }
                }
            }
        }
    }
}

/// Adds the column matrix `col` (rows `ld` floats apart) back into `image`
/// (which the caller zeroes).
pub fn col2im(g: &Geometry, col: &[f32], ld: usize, image: &mut [f32]) {
    let (kh, kw) = g.kernel;
    let cols = g.col_cols();
    for c in 0..g.channels {
        let plane = &mut image[c * g.height * g.width..(c + 1) * g.height * g.width];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &col[((c * kh + ki) * kw + kj) * ld..][..cols];
                for oh in 0..g.out_h {
                    let h = (oh * g.stride.0 + ki * g.dilation.0) as isize - g.pad.0 as isize;
                    if h < 0 || h >= g.height as isize {
                        continue;
                    }
                    let dst = &mut plane[h as usize * g.width..(h as usize + 1) * g.width];
                    let src = &row[oh * g.out_w..(oh + 1) * g.out_w];
                    if g.stride.1 == 1 && g.pad.1 == 0 {
                        // The common case: a contiguous run of the row.
                        dst[kj * g.dilation.1..kj * g.dilation.1 + g.out_w]
                            .iter_mut()
                            .zip(src)
                            .for_each(|(d, s)| *d += s);
                        continue;
                    }
                    for (ow, s) in src.iter().enumerate() {
                        let w = (ow * g.stride.1 + kj * g.dilation.1) as isize - g.pad.1 as isize;
                        if w >= 0 && w < g.width as isize {
                            dst[w as usize] += s;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn col2im_is_the_adjoint_of_im2col() {
        // <im2col(x), y> == <x, col2im(y)> for any x, y.
        for (stride, pad, dilation) in [((1, 1), (0, 0), (1, 1)), ((2, 1), (1, 2), (1, 1)), ((1, 2), (1, 0), (2, 2))] {
            let (h, w, k) = (5, 6, (3, 2));
            let out_h = (h + 2 * pad.0 - dilation.0 * (k.0 - 1) - 1) / stride.0 + 1;
            let out_w = (w + 2 * pad.1 - dilation.1 * (k.1 - 1) - 1) / stride.1 + 1;
            let g = Geometry { channels: 2, height: h, width: w, kernel: k, stride, pad, dilation, out_h, out_w };
            let x: Vec<f32> = (0..2 * h * w).map(|i| (i as f32 * 0.7).sin()).collect();
            let y: Vec<f32> = (0..g.col_rows() * g.col_cols()).map(|i| (i as f32 * 0.3).cos()).collect();
            let mut col = vec![0.0; y.len()];
            let ld = g.col_cols();
            im2col(&g, &x, &mut col, ld);
            let mut back = vec![0.0; x.len()];
            col2im(&g, &y, ld, &mut back);
            let lhs: f32 = col.iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: f32 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
            assert!((lhs - rhs).abs() < 1e-3, "{lhs} vs {rhs}");
        }
    }
}

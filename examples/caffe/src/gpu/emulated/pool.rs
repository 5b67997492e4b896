//! Max and average pooling (`layers/pool/pooling.cu`) in native
//! Rust: Caffe's windows (padding counted in the average's divisor, windows
//! clipped to the input), forward one output at a time, backward one input
//! pixel at a time gathering from the covering outputs in the CUDA loop
//! order, with its f32 operations (a strict `>` for the max, the mask's
//! argmax as a float, IEEE division by the window size). Only for geometry
//! where the CUDA int arithmetic cannot overflow or divide by zero; anything
//! else stays interpreted. Must never reorder an add.

use super::view::{for_each, Args, Fault, Memory};

/// planes, height, width, out_h, out_w, kh, kw, sh, sw, pad_h, pad_w.
#[derive(Clone, Copy)]
pub struct Geometry {
    planes: i64,
    height: i64,
    width: i64,
    out_h: i64,
    out_w: i64,
    kh: i64,
    kw: i64,
    sh: i64,
    sw: i64,
    pad_h: i64,
    pad_w: i64,
}

const INT: i64 = i32::MAX as i64;

struct Window {
    hs: i64,
    he: i64,
    ws: i64,
    we: i64,
    size: f32,
}

impl Geometry {
    pub fn read(a: &Args, first: usize) -> Geometry {
        let v = |k: usize| a.i32(first + k) as i64;
        Geometry {
            planes: a.u32(first) as i64,
            height: v(1),
            width: v(2),
            out_h: v(3),
            out_w: v(4),
            kh: v(5),
            kw: v(6),
            sh: v(7),
            sw: v(8),
            pad_h: v(9),
            pad_w: v(10),
        }
    }

    pub fn sane(&self) -> bool {
        let g = self;
        [g.height, g.width, g.out_h, g.out_w, g.kh, g.kw, g.sh, g.sw].iter().all(|&v| v >= 1)
            && g.pad_h >= 0
            && g.pad_w >= 0
            && g.planes * g.out_h * g.out_w <= INT
            && g.planes * g.height * g.width <= INT
            && g.kh * g.kw <= INT
            && g.out_h * g.sh + g.kh + g.height + 2 * g.pad_h <= INT
            && g.out_w * g.sw + g.kw + g.width + 2 * g.pad_w <= INT
    }

    pub fn outputs(&self) -> u32 {
        (self.planes * self.out_h * self.out_w) as u32
    }

    pub fn inputs(&self) -> u32 {
        (self.planes * self.height * self.width) as u32
    }

    fn window(&self, ph: i64, pw: i64) -> Window {
        let hstart = ph * self.sh - self.pad_h;
        let wstart = pw * self.sw - self.pad_w;
        let hend_pad = (hstart + self.kh).min(self.height + self.pad_h);
        let wend_pad = (wstart + self.kw).min(self.width + self.pad_w);
        Window {
            size: (((hend_pad - hstart) * (wend_pad - wstart)) as i32) as f32,
            hs: hstart.max(0),
            ws: wstart.max(0),
            he: (hstart + self.kh).min(self.height),
            we: (wstart + self.kw).min(self.width),
        }
    }

    /// Output `i`'s (plane, ph, pw).
    fn output(&self, i: u64) -> (u64, i64, i64) {
        let i = i as i64;
        ((i / (self.out_w * self.out_h)) as u64, (i / self.out_w) % self.out_h, i % self.out_w)
    }

    /// Input `i`'s (plane, h, c).
    fn input(&self, i: u64) -> (u64, i64, i64) {
        let i = i as i64;
        ((i / (self.width * self.height)) as u64, (i / self.width) % self.height, i % self.width)
    }
}

/// The outputs whose unclipped windows can hold input row `h`: [first, last).
fn covering(h: i64, k: i64, s: i64, pad: i64, out: i64) -> (i64, i64) {
    let first = if h + pad < k { 0 } else { (h + pad - k) / s + 1 };
    (first, ((h + pad) / s + 1).min(out))
}

/// `max_pool_forward(x, y, mask, geometry)`.
pub fn max_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 3);
    for_each(g.outputs(), |i| {
        let (plane, ph, pw) = g.output(i);
        let w = g.window(ph, pw);
        let xp = plane * (g.height * g.width) as u64;
        let mut best = f32::NEG_INFINITY;
        let mut at = w.hs * g.width + w.ws;
        for h in w.hs..w.he {
            for c in w.ws..w.we {
                let v = m.f32(0, xp + (h * g.width + c) as u64)?;
                if v > best {
                    best = v;
                    at = h * g.width + c;
                }
            }
        }
        m.set_f32(1, i, best)?;
        m.set_f32(2, i, (at as i32) as f32)
    })
}

/// `avg_pool_forward(x, y, geometry)`.
pub fn avg_forward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 2);
    for_each(g.outputs(), |i| {
        let (plane, ph, pw) = g.output(i);
        let w = g.window(ph, pw);
        let xp = plane * (g.height * g.width) as u64;
        let mut sum = 0.0f32;
        for h in w.hs..w.he {
            let mut row = 0.0f32;
            for c in w.ws..w.we {
                row += m.f32(0, xp + (h * g.width + c) as u64)?;
            }
            sum += row;
        }
        m.set_f32(1, i, sum / w.size)
    })
}

/// `max_pool_backward(dy, mask, dx, geometry)`.
pub fn max_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 3);
    for_each(g.inputs(), |i| {
        let (plane, h, c) = g.input(i);
        let (ph0, ph1) = covering(h, g.kh, g.sh, g.pad_h, g.out_h);
        let (pw0, pw1) = covering(c, g.kw, g.sw, g.pad_w, g.out_w);
        let base = plane * (g.out_h * g.out_w) as u64;
        let here = ((h * g.width + c) as i32) as f32;
        let mut grad = 0.0f32;
        for ph in ph0..ph1 {
            for pw in pw0..pw1 {
                let at = base + (ph * g.out_w + pw) as u64;
                if m.f32(1, at)? == here {
                    grad += m.f32(0, at)?;
                }
            }
        }
        m.set_f32(2, i, grad)
    })
}

/// `avg_pool_backward(dy, dx, geometry)`.
pub fn avg_backward(a: &Args, m: &mut Memory) -> Result<(), Fault> {
    let g = Geometry::read(a, 2);
    for_each(g.inputs(), |i| {
        let (plane, h, c) = g.input(i);
        let (ph0, ph1) = covering(h, g.kh, g.sh, g.pad_h, g.out_h);
        let (pw0, pw1) = covering(c, g.kw, g.sw, g.pad_w, g.out_w);
        let base = plane * (g.out_h * g.out_w) as u64;
        let mut grad = 0.0f32;
        for ph in ph0..ph1 {
            for pw in pw0..pw1 {
                let w = g.window(ph, pw);
                if h >= w.hs && h < w.he && c >= w.ws && c < w.we {
                    grad += m.f32(0, base + (ph * g.out_w + pw) as u64)? / w.size;
                }
            }
        }
        m.set_f32(1, i, grad)
    })
}

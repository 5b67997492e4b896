// Local response normalisation on the GPU, one thread per value gathering
// its own window (no atomics). The window sums run in the CPU layer's order
// with its roundings (no fused multiply-add), so they are the CPU's bits;
// only powf differs from the CPU's by a few ulps.
//
// Across channels the window of value (n, ch, h, w) is channels
// [ch - half, ch + half] at (h, w); within a channel it is the rows
// [h - half, h + half] x columns [w - half, w + half] of its plane, summed
// row by row; both are clipped to the blob.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// The blob's geometry as one argument list.
#define GEOMETRY unsigned count, int channels, int height, int width, int half, unsigned within

// What a window sums: the squares of x (forward), or dy * y / scale (backward).
struct Squares {
  const float* x;
  __device__ float at(size_t j) const {
    float v = x[j];
    return __fmul_rn(v, v);
  }
};

struct Ratios {
  const float* dy;
  const float* y;
  const float* scale;
  __device__ float at(size_t j) const { return __fdiv_rn(__fmul_rn(dy[j], y[j]), scale[j]); }
};

template <typename Term>
__device__ float window_sum(Term t, unsigned i, int channels, int height, int width, int half, unsigned within) {
  int plane = height * width;
  int p = (int)(i % (unsigned)plane);
  int ch = (int)((i / (unsigned)plane) % (unsigned)channels);
  size_t image = (size_t)(i / (unsigned)plane - (unsigned)ch) * (size_t)plane;
  float s = 0.0f;
  if (!within) {
    int lo = max(ch - half, 0), hi = min(ch + half, channels - 1);
    for (int j = lo; j <= hi; ++j) s = __fadd_rn(s, t.at(image + (size_t)j * plane + p));
  } else {
    size_t base = image + (size_t)ch * plane;
    int r = p / width, c = p % width;
    int rlo = max(r - half, 0), rhi = min(r + half, height - 1);
    int clo = max(c - half, 0), chi = min(c + half, width - 1);
    for (int rr = rlo; rr <= rhi; ++rr) {
      float row = 0.0f;
      for (int cc = clo; cc <= chi; ++cc) row = __fadd_rn(row, t.at(base + (size_t)rr * width + cc));
      s = __fadd_rn(s, row);
    }
  }
  return s;
}

// scale = c0 + a * (window sum of x^2); y = x * scale^neg_beta.
extern "C" __global__ void lrn_forward(const float* x, float* y, float* scale, GEOMETRY, float c0, float a,
                                       float neg_beta) {
  Squares sq = {x};
  FOR_EACH(i, count) {
    float s = __fadd_rn(c0, __fmul_rn(a, window_sum(sq, i, channels, height, width, half, within)));
    scale[i] = s;
    y[i] = __fmul_rn(x[i], powf(s, neg_beta));
  }
}

// dx = dy * scale^neg_beta - k * x * (window sum of dy * y / scale), k = 2 a beta.
extern "C" __global__ void lrn_backward(const float* x, const float* y, const float* dy, const float* scale, float* dx,
                                        GEOMETRY, float neg_beta, float k) {
  Ratios r = {dy, y, scale};
  FOR_EACH(i, count) {
    float s = window_sum(r, i, channels, height, width, half, within);
    dx[i] = __fsub_rn(__fmul_rn(dy[i], powf(scale[i], neg_beta)), __fmul_rn(__fmul_rn(k, x[i]), s));
  }
}

// Caffe's DataTransformer on the GPU, for a batch uploaded as stored: one
// thread per output value, out = (x - mean) * scale over image k's crop
// window at (h_off, w_off), mirrored when asked; the CPU transform's
// arithmetic, so both give the same bits. `placements` holds (h_off, w_off,
// mirror) per image; the mean is a CxHxW image of the uncropped size
// (mean_kind 1), one value per channel (2), or none (0).
#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define TRANSFORM(PIXEL)                                                                   \
  unsigned n = num * (unsigned)(c * oh * ow);                                              \
  FOR_EACH(i, n) {                                                                         \
    int xo = i % ow, y = (i / ow) % oh, ch = (i / (ow * oh)) % c;                          \
    unsigned k = i / (unsigned)(ow * oh * c);                                              \
    const unsigned* at = placements + 3 * (size_t)k;                                       \
    int xw = at[2] ? ow - 1 - xo : xo;                                                     \
    size_t src = ((size_t)ch * h + at[0] + y) * w + at[1] + xw;                            \
    float v = PIXEL(x[(size_t)k * c * h * w + src]);                                       \
    float m = mean_kind == 1 ? mean[src] : (mean_kind == 2 ? mean[ch] : 0.0f);             \
    out[i] = __fmul_rn(__fsub_rn(v, m), scale);                                            \
  }

#define BYTE(p) ((float)(p))
#define FLOAT(p) (p)

extern "C" __global__ void transform_bytes(const unsigned char* x, float* out, const unsigned* placements,
                                           const float* mean, unsigned mean_kind, unsigned num, int c, int h, int w,
                                           int oh, int ow, float scale) {
  TRANSFORM(BYTE)
}

extern "C" __global__ void transform_floats(const float* x, float* out, const unsigned* placements,
                                            const float* mean, unsigned mean_kind, unsigned num, int c, int h, int w,
                                            int oh, int ow, float scale) {
  TRANSFORM(FLOAT)
}

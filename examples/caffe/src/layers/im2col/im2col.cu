// Convolution's data movement on the GPU: im2col lays one image's receptive
// fields out as columns (row (c, ki, kj), column (oh, ow), rows `ld` floats
// apart) for the GEMM, and col2im adds them back. col2im runs one thread
// per image pixel, gathering the columns that read it in the order the CPU
// layer adds them, so it needs no atomics and matches the CPU's sums bit
// for bit. Dilation as Caffe's.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define GEOMETRY                                                                                                \
  int channels, int height, int width, int kh, int kw, int pad_h, int pad_w, int sh, int sw, int dil_h, int dil_w, \
      int out_h, int out_w

extern "C" __global__ void im2col(const float* image, float* col, unsigned ld, GEOMETRY) {
  unsigned n = (unsigned)channels * kh * kw * out_h * out_w;
  FOR_EACH(i, n) {
    int ow = i % out_w, oh = (i / out_w) % out_h;
    unsigned row = i / (out_w * out_h);
    int kj = row % kw, ki = (row / kw) % kh, c = row / (kw * kh);
    int h = oh * sh - pad_h + ki * dil_h, w = ow * sw - pad_w + kj * dil_w;
    float v = 0.0f;
    if (h >= 0 && h < height && w >= 0 && w < width) v = image[((size_t)c * height + h) * width + w];
    col[(size_t)row * ld + oh * out_w + ow] = v;
  }
}

extern "C" __global__ void col2im(const float* col, unsigned ld, float* image, GEOMETRY) {
  unsigned n = (unsigned)channels * height * width;
  FOR_EACH(i, n) {
    int w = i % width, h = (i / width) % height, c = i / (width * height);
    float v = image[i];
    for (int ki = 0; ki < kh; ++ki) {
      int hh = h + pad_h - ki * dil_h;
      if (hh < 0 || hh % sh != 0 || hh / sh >= out_h) continue;
      int oh = hh / sh;
      for (int kj = 0; kj < kw; ++kj) {
        int ww = w + pad_w - kj * dil_w;
        if (ww < 0 || ww % sw != 0 || ww / sw >= out_w) continue;
        int ow = ww / sw;
        v += col[(size_t)((c * kh + ki) * kw + kj) * ld + oh * out_w + ow];
      }
    }
    image[i] = v;
  }
}

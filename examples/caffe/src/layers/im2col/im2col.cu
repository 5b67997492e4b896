// Convolution's data movement on the GPU, for a run of `images` images at
// once so a layer launches a handful of kernels per minibatch, not a few
// per image. im2col lays the images' receptive fields out side by side as
// columns (row (c, ki, kj), column (image, oh, ow), rows `ld` floats apart)
// for the GEMMs, and col2im adds them back. col2im runs one thread per image
// pixel, gathering the columns that read it in the order the CPU layer adds
// them, so it needs no atomics and matches the CPU's sums bit for bit.
// swap_outer turns an a×b×inner array into b×a×inner (the layout the
// weight-gradient GEMM wants of the top's gradient). Dilation as Caffe's.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define GEOMETRY                                                                                                \
  int channels, int height, int width, int kh, int kw, int pad_h, int pad_w, int sh, int sw, int dil_h, int dil_w, \
      int out_h, int out_w

extern "C" __global__ void im2col(const float* images, unsigned image_stride, float* col, unsigned ld,
                                  unsigned count, GEOMETRY) {
  unsigned cols = (unsigned)out_h * out_w;
  unsigned n = (unsigned)channels * kh * kw * count * cols;
  // Threads walk (row, image, pixel), pixel fastest: consecutive threads write consecutive columns.
  FOR_EACH(i, n) {
    unsigned pixel = i % cols, image = (i / cols) % count, row = i / (cols * count);
    int ow = pixel % out_w, oh = pixel / out_w;
    int kj = row % kw, ki = (row / kw) % kh, c = row / (kw * kh);
    int h = oh * sh - pad_h + ki * dil_h, w = ow * sw - pad_w + kj * dil_w;
    float v = 0.0f;
    if (h >= 0 && h < height && w >= 0 && w < width)
      v = images[(size_t)image * image_stride + ((size_t)c * height + h) * width + w];
    col[(size_t)row * ld + (size_t)image * cols + pixel] = v;
  }
}

extern "C" __global__ void col2im(const float* col, unsigned ld, float* images, unsigned image_stride,
                                  unsigned count, GEOMETRY) {
  unsigned plane = (unsigned)channels * height * width;
  unsigned cols = (unsigned)out_h * out_w;
  FOR_EACH(i, plane * count) {
    unsigned image = i / plane, p = i % plane;
    int w = p % width, h = (p / width) % height, c = p / (width * height);
    float* at = images + (size_t)image * image_stride + p;
    const float* base = col + (size_t)image * cols;
    float v = *at;
    for (int ki = 0; ki < kh; ++ki) {
      int hh = h + pad_h - ki * dil_h;
      if (hh < 0 || hh % sh != 0 || hh / sh >= out_h) continue;
      int oh = hh / sh;
      for (int kj = 0; kj < kw; ++kj) {
        int ww = w + pad_w - kj * dil_w;
        if (ww < 0 || ww % sw != 0 || ww / sw >= out_w) continue;
        int ow = ww / sw;
        v += base[(size_t)((c * kh + ki) * kw + kj) * ld + oh * out_w + ow];
      }
    }
    *at = v;
  }
}

extern "C" __global__ void swap_outer(const float* src, float* dst, unsigned a, unsigned b, unsigned inner) {
  // dst[j][i][k] = src[i][j][k]; threads walk dst in order.
  FOR_EACH(t, a * b * inner) {
    unsigned k = t % inner, i = (t / inner) % a, j = t / (inner * a);
    dst[t] = src[((size_t)i * b + j) * inner + k];
  }
}

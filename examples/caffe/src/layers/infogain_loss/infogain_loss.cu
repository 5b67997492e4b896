// InfogainLoss on the GPU, one thread per position (item and spatial
// index; the class count is small): the softmax along the class axis
// (stride `inner`) with the device's expf/logf (a few ulps from the CPU's),
// then forward writes the position's sum of H[label, k] * log max(p_k,
// FLT_MIN) (the host negates and sums them in f64, in position order) and
// backward writes scale * (p_k * sum_j H[label, j] - H[label, k]). A label
// past the classes (the CPU layer stops on it) counts as the last class.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// The softmax's maximum and normaliser at position (i, j).
__device__ void infogain_softmax(const float* x, unsigned i, unsigned j, unsigned classes, unsigned inner,
                                 float* max, float* sum) {
  const float* at = x + (size_t)i * classes * inner + j;
  float m = -__int_as_float(0x7f800000);
  for (unsigned k = 0; k < classes; ++k) m = fmaxf(m, at[(size_t)k * inner]);
  float s = 0.0f;
  for (unsigned k = 0; k < classes; ++k) s += expf(at[(size_t)k * inner] - m);
  *max = m;
  *sum = s;
}

__device__ unsigned infogain_label(const float* labels, unsigned pos, unsigned classes) {
  unsigned y = (unsigned)labels[pos];
  return y < classes ? y : classes - 1;
}

extern "C" __global__ void infogain_forward(const float* x, const float* labels, const float* h, float* out,
                                            unsigned outer, unsigned classes, unsigned inner) {
  unsigned n = outer * inner;
  FOR_EACH(pos, n) {
    unsigned i = pos / inner, j = pos % inner;
    float m, s;
    infogain_softmax(x, i, j, classes, inner, &m, &s);
    const float* at = x + (size_t)i * classes * inner + j;
    const float* row = h + (size_t)infogain_label(labels, pos, classes) * classes;
    float total = 0.0f;
    for (unsigned k = 0; k < classes; ++k) {
      float p = expf(at[(size_t)k * inner] - m) / s;
      total += row[k] * logf(fmaxf(p, 1.17549435e-38f));
    }
    out[pos] = total;
  }
}

extern "C" __global__ void infogain_backward(const float* x, const float* labels, const float* h, float* d,
                                             unsigned outer, unsigned classes, unsigned inner, float scale) {
  unsigned n = outer * inner;
  FOR_EACH(pos, n) {
    unsigned i = pos / inner, j = pos % inner;
    float m, s;
    infogain_softmax(x, i, j, classes, inner, &m, &s);
    const float* at = x + (size_t)i * classes * inner + j;
    const float* row = h + (size_t)infogain_label(labels, pos, classes) * classes;
    float row_sum = 0.0f;
    for (unsigned k = 0; k < classes; ++k) row_sum += row[k];
    for (unsigned k = 0; k < classes; ++k) {
      float p = expf(at[(size_t)k * inner] - m) / s;
      d[((size_t)i * classes + k) * inner + j] = scale * (p * row_sum - row[k]);
    }
  }
}

// Softmax along one axis on the GPU: one thread per position of the other
// axes (outer x inner), looping over the axis in the CPU layer's order with
// its roundings; expf differs from the CPU's exp by a few ulps, and backward
// gives the CPU's bits from the same probabilities.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// positions = outer * inner; value k of position i is at (i / inner) * channels * inner + k * inner + i % inner.
extern "C" __global__ void softmax_forward(const float* x, float* y, unsigned positions, unsigned channels,
                                           unsigned inner) {
  FOR_EACH(i, positions) {
    size_t base = (size_t)(i / inner) * channels * inner + i % inner;
    float m = -__int_as_float(0x7f800000);
    for (unsigned k = 0; k < channels; ++k) m = fmaxf(m, x[base + (size_t)k * inner]);
    float sum = 0.0f;
    for (unsigned k = 0; k < channels; ++k) {
      float e = expf(__fsub_rn(x[base + (size_t)k * inner], m));
      y[base + (size_t)k * inner] = e;
      sum = __fadd_rn(sum, e);
    }
    for (unsigned k = 0; k < channels; ++k) y[base + (size_t)k * inner] = __fdiv_rn(y[base + (size_t)k * inner], sum);
  }
}

// dx = y * (dy - sum_k dy_k * y_k) per position.
extern "C" __global__ void softmax_backward(const float* y, const float* dy, float* dx, unsigned positions,
                                            unsigned channels, unsigned inner) {
  FOR_EACH(i, positions) {
    size_t base = (size_t)(i / inner) * channels * inner + i % inner;
    float dot = 0.0f;
    for (unsigned k = 0; k < channels; ++k) {
      size_t j = base + (size_t)k * inner;
      dot = __fadd_rn(dot, __fmul_rn(dy[j], y[j]));
    }
    for (unsigned k = 0; k < channels; ++k) {
      size_t j = base + (size_t)k * inner;
      dx[j] = __fmul_rn(y[j], __fsub_rn(dy[j], dot));
    }
  }
}

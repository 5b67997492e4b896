// SigmoidCrossEntropyLoss on the GPU: forward, one thread per item, sums
// the item's cross-entropies (computed stably in float with the device's
// expf/log1pf, added up in double; the CPU layer works in f64), and the
// host sums the items in f64; backward, one thread per value, writes
// scale * (sigmoid(x) - t). Compare with a tolerance.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void sce_items(const float* x, const float* t, float* out, unsigned num, unsigned dim) {
  FOR_EACH(i, num) {
    double sum = 0.0;
    for (unsigned k = 0; k < dim; ++k) {
      float v = x[(size_t)i * dim + k], target = t[(size_t)i * dim + k];
      float pos = v >= 0.0f ? 1.0f : 0.0f;
      // -(x (t - pos) - log(1 + e^(x - 2 x pos)))
      float loss = log1pf(expf(v - 2.0f * v * pos)) - v * (target - pos);
      sum += (double)loss;
    }
    out[i] = (float)sum;
  }
}

extern "C" __global__ void sce_backward(const float* x, const float* t, float* d, unsigned n, float scale) {
  FOR_EACH(i, n) { d[i] = scale * (1.0f / (1.0f + expf(-x[i])) - t[i]); }
}

// EuclideanLoss on the GPU: forward, one thread per item, sums the item's
// squared differences in double (the CPU layer sums every value in f64;
// the host sums the items' partial sums in f64); backward, one thread per
// value, writes sign * scale * (a - b), the CPU layer's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void euclidean_items(const float* a, const float* b, float* out, unsigned num, unsigned dim) {
  FOR_EACH(i, num) {
    double sum = 0.0;
    for (unsigned k = 0; k < dim; ++k) {
      double t = (double)__fsub_rn(a[(size_t)i * dim + k], b[(size_t)i * dim + k]);
      sum = __dadd_rn(sum, __dmul_rn(t, t));
    }
    out[i] = (float)sum;
  }
}

// d = c * (a - b), c = sign * scale.
extern "C" __global__ void euclidean_backward(const float* a, const float* b, float* d, unsigned n, float c) {
  FOR_EACH(i, n) { d[i] = __fmul_rn(c, __fsub_rn(a[i], b[i])); }
}

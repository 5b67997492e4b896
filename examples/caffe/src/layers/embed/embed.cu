// Embed on the GPU. Forward: one thread per top value copies its table
// entry (and adds the bias). Backward: one thread per output column walks
// the bottom's indexes in order and adds each top gradient into its row of
// that column (and into the bias), as the CPU layer does: no two threads
// touch one value, no atomics, the CPU layer's bits. An index that is not
// an integer from 0 to input_dim - 1 (the CPU layer stops on it) gives a
// row of NaN forward, which the trainer's non-finite check reports, and
// nothing backward.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// The table row of index value v, or -1.
__device__ int embed_row(float v, unsigned input_dim) {
  return v >= 0.0f && v == floorf(v) && v < (float)input_dim ? (int)v : -1;
}

// params: the input_dim x n_out table, then (has_bias) the n_out biases.
extern "C" __global__ void embed_forward(const float* idx, const float* params, float* y, unsigned count,
                                         unsigned n_out, unsigned input_dim, unsigned has_bias) {
  unsigned n = count * n_out;
  FOR_EACH(i, n) {
    unsigned k = i / n_out, j = i % n_out;
    int r = embed_row(idx[k], input_dim);
    if (r < 0) {
      y[i] = __int_as_float(0x7fc00000);
      continue;
    }
    float v = params[(size_t)r * n_out + j];
    if (has_bias) v = __fadd_rn(v, params[(size_t)input_dim * n_out + j]);
    y[i] = v;
  }
}

// grad (zeroed by the caller) is laid out as params.
extern "C" __global__ void embed_backward(const float* idx, const float* dy, float* grad, unsigned count,
                                          unsigned n_out, unsigned input_dim, unsigned has_bias) {
  FOR_EACH(j, n_out) {
    float bias = 0.0f;
    for (unsigned k = 0; k < count; ++k) {
      int r = embed_row(idx[k], input_dim);
      if (r < 0) continue;
      float g = dy[(size_t)k * n_out + j];
      grad[(size_t)r * n_out + j] = __fadd_rn(grad[(size_t)r * n_out + j], g);
      bias = __fadd_rn(bias, g);
    }
    if (has_bias) grad[(size_t)input_dim * n_out + j] = bias;
  }
}

// Elementwise arithmetic of Eltwise and Split on the GPU, one thread per
// value, one launch per bottom (their count varies) in the CPU layers'
// order and roundings (no fused multiply-add): the CPU's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// y += c * x (Eltwise's weighted sum; Split's gradient sum with c = 1).
extern "C" __global__ void add_scaled(float* y, const float* x, unsigned n, float c) {
  FOR_EACH(i, n) { y[i] = __fadd_rn(y[i], __fmul_rn(c, x[i])); }
}

// y = c * x (the weighted sum's gradient).
extern "C" __global__ void eltwise_scale_copy(float* y, const float* x, unsigned n, float c) {
  FOR_EACH(i, n) { y[i] = __fmul_rn(c, x[i]); }
}

// y *= x (the product and its gradient).
extern "C" __global__ void eltwise_multiply(float* y, const float* x, unsigned n) {
  FOR_EACH(i, n) { y[i] = __fmul_rn(y[i], x[i]); }
}

// Bottom k of the maximum: where it beats y (strictly: earlier bottoms win
// ties), y takes it and the mask records k.
extern "C" __global__ void eltwise_max_forward(float* y, float* mask, const float* x, unsigned n, unsigned k) {
  FOR_EACH(i, n) {
    float v = x[i];
    if (v > y[i]) {
      y[i] = v;
      mask[i] = (float)k;
    }
  }
}

// Bottom k's gradient of the maximum: dy where it won, else 0.
extern "C" __global__ void eltwise_max_backward(float* dx, const float* dy, const float* mask, unsigned n,
                                                unsigned k) {
  FOR_EACH(i, n) { dx[i] = (unsigned)mask[i] == k ? dy[i] : 0.0f; }
}

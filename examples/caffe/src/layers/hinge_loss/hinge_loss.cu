// HingeLoss on the GPU, one thread per score: forward writes each score's
// hinge max(0, 1 + t * x) (t = -1 at the label, +1 elsewhere) and the host
// sums them (or their squares) in f64 in the CPU layer's order; backward
// writes the gradient. No fused multiply-add: the CPU layer's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// The sign t of score i (item i / dim, class i % dim): -1 at the label. A label converts as the
// CPU's `as usize` does (saturating, NaN to 0).
__device__ float hinge_sign(const float* labels, unsigned i, unsigned dim) {
  return (unsigned)labels[i / dim] == i % dim ? -1.0f : 1.0f;
}

extern "C" __global__ void hinge_margins(const float* x, const float* labels, float* m, unsigned num,
                                         unsigned dim) {
  unsigned n = num * dim;
  FOR_EACH(i, n) { m[i] = fmaxf(__fadd_rn(1.0f, __fmul_rn(hinge_sign(labels, i, dim), x[i])), 0.0f); }
}

// L1 (l2 = 0): t * scale where the hinge is positive, else 0; L2: 2 * t * m * scale.
extern "C" __global__ void hinge_backward(const float* x, const float* labels, float* d, unsigned num,
                                          unsigned dim, unsigned l2, float scale) {
  unsigned n = num * dim;
  FOR_EACH(i, n) {
    float t = hinge_sign(labels, i, dim);
    float m = fmaxf(__fadd_rn(1.0f, __fmul_rn(t, x[i])), 0.0f);
    if (l2)
      d[i] = __fmul_rn(__fmul_rn(__fmul_rn(2.0f, t), m), scale);
    else
      d[i] = m > 0.0f ? __fmul_rn(t, scale) : 0.0f;
  }
}

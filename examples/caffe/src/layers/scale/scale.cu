// Scale (one bottom, its own gamma and optional beta) on the GPU, in place:
// y (outer, dim, inner) = x * gamma[s] + beta[s], keeping x for backward,
// with the CPU layer's roundings (no fused multiply-add; +0 without a bias,
// as the CPU adds). Backward is one block per parameter s owning every
// value of s: it reduces gamma's and beta's gradients in shared memory in a
// fixed order (the same on every run; not the CPU's order, so compare with
// a tolerance) and scales its values of the gradient by gamma, so no value
// has two writers and no atomics are needed.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define REDUCE_THREADS 256

// The block's total of v (every thread gets it); blockDim.x == REDUCE_THREADS.
__device__ float block_sum(float v, float* partial) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  float total = partial[0];
  // The next call rewrites `partial`: everyone must have read the total first.
  __syncthreads();
  return total;
}

extern "C" __global__ void scale_forward(float* y, float* x_keep, const float* params, unsigned outer, unsigned dim,
                                         unsigned inner, unsigned has_bias) {
  unsigned n = outer * dim * inner;
  FOR_EACH(i, n) {
    unsigned s = (i / inner) % dim;
    float v = y[i];
    x_keep[i] = v;
    float b = has_bias ? params[dim + s] : 0.0f;
    y[i] = __fadd_rn(__fmul_rn(v, params[s]), b);
  }
}

// `dim` blocks of REDUCE_THREADS: grad[s] = sum d * x, grad[dim + s] = sum d
// (with a bias), then d *= gamma[s], over the values of parameter s.
extern "C" __global__ void scale_backward(const float* x, float* d, const float* params, float* grad, unsigned outer,
                                          unsigned dim, unsigned inner, unsigned has_bias) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned s = blockIdx.x;
  float g = params[s];
  float gx = 0.0f, gs = 0.0f;
  for (unsigned j = threadIdx.x; j < outer * inner; j += blockDim.x) {
    size_t at = ((size_t)(j / inner) * dim + s) * inner + j % inner;
    float dv = d[at];
    gx = __fadd_rn(gx, __fmul_rn(dv, x[at]));
    gs = __fadd_rn(gs, dv);
    d[at] = __fmul_rn(dv, g);
  }
  gx = block_sum(gx, partial);
  gs = block_sum(gs, partial);
  if (threadIdx.x == 0) {
    grad[s] = gx;
    if (has_bias) grad[dim + s] = gs;
  }
}

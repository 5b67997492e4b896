// Reduction on the GPU. Forward: one block of REDUCE_THREADS threads per
// top value, summing its row (x, |x| or x squared) in shared memory in a
// fixed order (not the CPU's: compare with a tolerance), times coeff.
// Backward: one thread per bottom value, coeff times its row's top
// gradient, times sign(x) (ASUM) or 2x (SUMSQ): the CPU layer's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define REDUCE_THREADS 256

// op: 0 sum (and mean, whose 1/dim is in coeff), 1 sum of |x|, 2 sum of x * x.
extern "C" __global__ void reduction_forward(const float* x, float* y, unsigned dim, unsigned op, float coeff) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned r = blockIdx.x;
  const float* row = x + (size_t)r * dim;
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) {
    float v = row[j];
    sum += op == 1 ? fabsf(v) : op == 2 ? __fmul_rn(v, v) : v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[r] = __fmul_rn(partial[0], coeff);
}

// SUM and MEAN: dx = coeff * dy of the row (x is not read).
extern "C" __global__ void reduction_spread(const float* dy, float* dx, unsigned rows, unsigned dim, float coeff) {
  unsigned n = rows * dim;
  FOR_EACH(i, n) { dx[i] = __fmul_rn(dy[i / dim], coeff); }
}

// ASUM (op 1): dx = g * sign(x); SUMSQ (op 2): dx = g * 2 * x; g = coeff * dy of the row.
extern "C" __global__ void reduction_backward(const float* x, const float* dy, float* dx, unsigned rows,
                                              unsigned dim, unsigned op, float coeff) {
  unsigned n = rows * dim;
  FOR_EACH(i, n) {
    float g = __fmul_rn(dy[i / dim], coeff), v = x[i];
    float sign = (float)(v > 0.0f) - (float)(v < 0.0f);
    dx[i] = op == 1 ? __fmul_rn(g, sign) : __fmul_rn(__fmul_rn(g, 2.0f), v);
  }
}

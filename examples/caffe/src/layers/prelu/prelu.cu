// PReLU on the GPU, in place: y = x where x > 0, else a * x, keeping x for
// backward. Backward is one block per channel owning that channel's values:
// it scales the gradient where x <= 0 and reduces the slope's gradient
// sum d * x (x <= 0) in shared memory in a fixed order, so no value has two
// writers and no atomics are needed; a channel-shared slope then sums the
// channels' totals in one more block, in channel order. The same on every
// run; not the CPU's summation order (compare with a tolerance).

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

// y is (num, channels, inner); the slope of channel c is slopes[shared ? 0 : c].
extern "C" __global__ void prelu_forward(float* y, float* x_keep, const float* slopes, unsigned n, unsigned channels,
                                         unsigned inner, unsigned shared) {
  FOR_EACH(i, n) {
    float v = y[i];
    x_keep[i] = v;
    float a = slopes[shared ? 0u : (i / inner) % channels];
    y[i] = v > 0.0f ? v : __fmul_rn(a, v);
  }
}

// `channels` blocks of REDUCE_THREADS: sums[c] = sum over channel c of d * x where x <= 0, and d *= a there.
extern "C" __global__ void prelu_backward(const float* x, float* d, const float* slopes, float* sums, unsigned num,
                                          unsigned channels, unsigned inner, unsigned shared) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned c = blockIdx.x;
  float a = slopes[shared ? 0u : c];
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < num * inner; j += blockDim.x) {
    size_t at = ((size_t)(j / inner) * channels + c) * inner + j % inner;
    float xv = x[at];
    if (xv <= 0.0f) {
      float dv = d[at];
      sum = __fadd_rn(sum, __fmul_rn(dv, xv));
      d[at] = __fmul_rn(dv, a);
    }
  }
  sum = block_sum(sum, partial);
  if (threadIdx.x == 0) sums[c] = sum;
}

// One block of REDUCE_THREADS: *total = sum of sums[0..n).
extern "C" __global__ void prelu_sum(const float* sums, unsigned n, float* total) {
  __shared__ float partial[REDUCE_THREADS];
  float s = 0.0f;
  for (unsigned j = threadIdx.x; j < n; j += blockDim.x) s = __fadd_rn(s, sums[j]);
  s = block_sum(s, partial);
  if (threadIdx.x == 0) *total = s;
}

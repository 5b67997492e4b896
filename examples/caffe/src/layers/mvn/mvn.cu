// MVN on the GPU: one block of REDUCE_THREADS threads per normalised row
// (an item's channel, or an item), its sums reduced in shared memory in a
// fixed order (not the CPU's: compare with a tolerance). Forward keeps the
// row's mean, and with the variance its sigma + eps, in `stats` (means,
// then sigmas) for backward.

#define REDUCE_THREADS 256

// The sum of every thread's v over the block (blockDim.x a power of two).
__device__ float block_sum(float v, float* partial) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  float sum = partial[0];
  __syncthreads();
  return sum;
}

extern "C" __global__ void mvn_forward(const float* x, float* y, float* stats, unsigned rows, unsigned dim,
                                       unsigned normalize, float eps) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned r = blockIdx.x;
  const float* xr = x + (size_t)r * dim;
  float* yr = y + (size_t)r * dim;
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) sum += xr[j];
  float mean = block_sum(sum, partial) / (float)dim;
  float squares = 0.0f;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) {
    float v = xr[j] - mean;
    yr[j] = v;
    squares += v * v;
  }
  if (threadIdx.x == 0) stats[r] = mean;
  if (!normalize) return;
  float sigma = sqrtf(block_sum(squares, partial) / (float)dim) + eps;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) yr[j] = yr[j] / sigma;
  if (threadIdx.x == 0) stats[rows + r] = sigma;
}

// Without the variance: dx = dy - mean(dy) (x is not read).
extern "C" __global__ void mvn_backward_centered(const float* dy, float* dx, unsigned dim) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned r = blockIdx.x;
  const float* g = dy + (size_t)r * dim;
  float* d = dx + (size_t)r * dim;
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) sum += g[j];
  float mean_g = block_sum(sum, partial) / (float)dim;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) d[j] = g[j] - mean_g;
}

// With the variance: dx = (dy - mean(dy) - y * mean(dy * y)) / sigma, y = (x - mean) / sigma.
extern "C" __global__ void mvn_backward(const float* x, const float* dy, const float* stats, float* dx,
                                        unsigned rows, unsigned dim) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned r = blockIdx.x;
  const float* xr = x + (size_t)r * dim;
  const float* g = dy + (size_t)r * dim;
  float* d = dx + (size_t)r * dim;
  float mean = stats[r], sigma = stats[rows + r];
  float sum = 0.0f, dot = 0.0f;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) {
    sum += g[j];
    dot += g[j] * ((xr[j] - mean) / sigma);
  }
  float mean_g = block_sum(sum, partial) / (float)dim;
  float mean_gy = block_sum(dot, partial) / (float)dim;
  for (unsigned j = threadIdx.x; j < dim; j += blockDim.x) {
    float y = (xr[j] - mean) / sigma;
    d[j] = (g[j] - mean_g - y * mean_gy) / sigma;
  }
}

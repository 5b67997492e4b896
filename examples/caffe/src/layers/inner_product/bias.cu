// Bias terms on the GPU: added to every position of a channel (convolution:
// `inner` = out_h * out_w, inner product: 1), and their gradient, the sum
// of the top gradient over the batch and the positions. The gradient is one
// block per channel reducing in shared memory, in a fixed order, so it is
// the same on every run (not the CPU's order: compare with a tolerance).

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// y is (num, channels, inner).
extern "C" __global__ void add_bias(float* y, const float* bias, unsigned num, unsigned channels, unsigned inner) {
  unsigned n = num * channels * inner;
  FOR_EACH(i, n) { y[i] += bias[(i / inner) % channels]; }
}

#define REDUCE_THREADS 256

// Launched with `channels` blocks of REDUCE_THREADS threads: grad[c] = sum of dy[:, c, :].
extern "C" __global__ void bias_gradient(const float* dy, float* grad, unsigned num, unsigned channels,
                                         unsigned inner) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned c = blockIdx.x;
  float sum = 0.0f;
  for (unsigned j = threadIdx.x; j < num * inner; j += blockDim.x) {
    unsigned b = j / inner, k = j % inner;
    sum += dy[((size_t)b * channels + c) * inner + k];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) grad[c] = partial[0];
}

// BatchNorm on the GPU, in place. With batch statistics, one block per
// channel owns that channel's values: it reduces their mean, then their
// variance, in shared memory in a fixed order (the same on every run; the
// CPU sums in f64, so compare with a tolerance), keeps both and
// 1 / sqrt(var + eps) in the backward state and normalises the values; its
// backward reduces mean(dy) and mean(dy * y) the same way. With global
// statistics everything is per value or per channel, with the CPU layer's
// roundings. No value has two writers; no atomics.
//
// Values are (num, channels, spatial); the backward state `aux` is
// mean[channels], var[channels], inv_std[channels].

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

// Where the j-th value of channel c lies.
__device__ size_t channel_value(unsigned j, unsigned c, unsigned channels, unsigned spatial) {
  return ((size_t)(j / spatial) * channels + c) * spatial + j % spatial;
}

// `channels` blocks of REDUCE_THREADS.
extern "C" __global__ void batch_norm_train_forward(float* y, float* aux, unsigned num, unsigned channels,
                                                    unsigned spatial, float eps) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned c = blockIdx.x, m = num * spatial;
  float s = 0.0f;
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) s = __fadd_rn(s, y[channel_value(j, c, channels, spatial)]);
  float mean = __fdiv_rn(block_sum(s, partial), (float)m);
  float q = 0.0f;
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) {
    float dv = __fsub_rn(y[channel_value(j, c, channels, spatial)], mean);
    q = __fadd_rn(q, __fmul_rn(dv, dv));
  }
  float var = __fdiv_rn(block_sum(q, partial), (float)m);
  float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) {
    size_t at = channel_value(j, c, channels, spatial);
    y[at] = __fmul_rn(__fsub_rn(y[at], mean), inv);
  }
  if (threadIdx.x == 0) {
    aux[c] = mean;
    aux[channels + c] = var;
    aux[2 * channels + c] = inv;
  }
}

// The stored statistics: mean = params[c] / factor, var = params[channels + c] / factor (0 when factor is 0).
extern "C" __global__ void batch_norm_global_stats(const float* params, float* aux, unsigned channels, float eps) {
  FOR_EACH(c, channels) {
    float f = params[2 * channels];
    float factor = f == 0.0f ? 0.0f : __fdiv_rn(1.0f, f);
    float var = __fmul_rn(params[channels + c], factor);
    aux[c] = __fmul_rn(params[c], factor);
    aux[channels + c] = var;
    aux[2 * channels + c] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  }
}

// y = (y - mean[c]) * inv_std[c].
extern "C" __global__ void batch_norm_apply(float* y, const float* aux, unsigned n, unsigned channels,
                                            unsigned spatial) {
  FOR_EACH(i, n) {
    unsigned c = (i / spatial) % channels;
    y[i] = __fmul_rn(__fsub_rn(y[i], aux[c]), aux[2 * channels + c]);
  }
}

// The change to the running statistics: grad = keep * params + (mean, unbias * var, 1), keep = fraction - 1.
extern "C" __global__ void batch_norm_update(const float* params, const float* aux, float* grad, unsigned channels,
                                             float keep, float unbias) {
  unsigned n = 2 * channels + 1;
  FOR_EACH(i, n) {
    float batch = i < channels ? aux[i] : i < 2 * channels ? __fmul_rn(unbias, aux[i]) : 1.0f;
    grad[i] = __fadd_rn(__fmul_rn(keep, params[i]), batch);
  }
}

// Global statistics' gradient: d *= inv_std[c].
extern "C" __global__ void batch_norm_global_backward(float* d, const float* aux, unsigned n, unsigned channels,
                                                      unsigned spatial) {
  FOR_EACH(i, n) {
    unsigned c = (i / spatial) % channels;
    d[i] = __fmul_rn(d[i], aux[2 * channels + c]);
  }
}

// `channels` blocks of REDUCE_THREADS: d = (d - mean(d) - mean(d * y) * y) * inv_std over channel c.
extern "C" __global__ void batch_norm_train_backward(const float* y, float* d, const float* aux, unsigned num,
                                                     unsigned channels, unsigned spatial) {
  __shared__ float partial[REDUCE_THREADS];
  unsigned c = blockIdx.x, m = num * spatial;
  float sd = 0.0f, sdy = 0.0f;
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) {
    size_t at = channel_value(j, c, channels, spatial);
    float g = d[at];
    sd = __fadd_rn(sd, g);
    sdy = __fadd_rn(sdy, __fmul_rn(g, y[at]));
  }
  float a = __fdiv_rn(block_sum(sd, partial), (float)m);
  float k = __fdiv_rn(block_sum(sdy, partial), (float)m);
  float inv = aux[2 * channels + c];
  for (unsigned j = threadIdx.x; j < m; j += blockDim.x) {
    size_t at = channel_value(j, c, channels, spatial);
    d[at] = __fmul_rn(__fsub_rn(__fsub_rn(d[at], a), __fmul_rn(k, y[at])), inv);
  }
}

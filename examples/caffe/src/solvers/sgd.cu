// The SGD solvers' step on the GPU, where the parameters live, in the CPU
// solver's order and rounding (no fused multiply-add, so both give the same
// bits): g <- scale * (g * factor + decay * reg(w)), reg(w) = w (L2) or
// sign(w) (L1, `l1` != 0); h <- momentum * h + rate * g; the delta written
// over the gradient (the update geeps adds to the parameters) is -h, or for
// Nesterov (`nesterov` != 0) -((1 + momentum) * h - momentum * h_old).
#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void sgd_step(const float* w, float* grad_delta, float* history, unsigned n, float factor,
                                    float decay, unsigned l1, float scale, float rate, float momentum,
                                    unsigned nesterov) {
  FOR_EACH(i, n) {
    float wi = w[i];
    float reg = l1 ? (float)((0.0f < wi) - (wi < 0.0f)) : wi;
    float g = __fmul_rn(scale, __fadd_rn(__fmul_rn(grad_delta[i], factor), __fmul_rn(decay, reg)));
    float old = history[i];
    float h = __fadd_rn(__fmul_rn(momentum, old), __fmul_rn(rate, g));
    history[i] = h;
    float step = nesterov ? __fsub_rn(__fmul_rn(__fadd_rn(1.0f, momentum), h), __fmul_rn(momentum, old)) : h;
    grad_delta[i] = -step;
  }
}

#define REDUCE_THREADS 256

// counts[b] = how many of block b's elements of x[0..n) are NaN or infinite
// (x - x is 0 exactly for finite x). Launched with REDUCE_THREADS threads per
// block; the host adds the blocks' counts.
extern "C" __global__ void count_nonfinite(const float* x, unsigned n, float* counts) {
  __shared__ unsigned partial[REDUCE_THREADS];
  unsigned bad = 0;
  FOR_EACH(i, n) { bad += (x[i] - x[i] == 0.0f) ? 0u : 1u; }
  partial[threadIdx.x] = bad;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[blockIdx.x] = (float)partial[0];
}

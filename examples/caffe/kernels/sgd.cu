// The SGD solver's step on the GPU, where the parameters live: history
// h = momentum * h + rate * (g + decay * w), and the delta -h written over
// the gradient (the update geeps adds to the parameters). Products are
// rounded one at a time (no fused multiply-add), as the CPU solver computes
// them, so both give the same bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void sgd_delta(const float* w, float* grad_delta, float* history, unsigned n, float momentum,
                                     float rate, float decay) {
  FOR_EACH(i, n) {
    float inner = __fadd_rn(grad_delta[i], __fmul_rn(decay, w[i]));
    float h = __fadd_rn(__fmul_rn(momentum, history[i]), __fmul_rn(rate, inner));
    history[i] = h;
    grad_delta[i] = -h;
  }
}

// MultinomialLogisticLoss on the GPU: forward picks each item's
// probability at its label, floored at 1e-20 (the host takes the logs and
// sums them in f64, in item order, as the CPU layer does); backward writes
// -scale / p at each label and 0 elsewhere: the CPU layer's bits. A label
// past the classes (the CPU layer stops on it) counts as the last class.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

__device__ unsigned mll_label(const float* labels, unsigned i, unsigned dim) {
  unsigned y = (unsigned)labels[i];
  return y < dim ? y : dim - 1;
}

extern "C" __global__ void mll_picked(const float* p, const float* labels, float* picked, unsigned num,
                                      unsigned dim) {
  FOR_EACH(i, num) { picked[i] = fmaxf(p[(size_t)i * dim + mll_label(labels, i, dim)], 1e-20f); }
}

extern "C" __global__ void mll_backward(const float* p, const float* labels, float* d, unsigned num, unsigned dim,
                                        float scale) {
  unsigned n = num * dim;
  FOR_EACH(i, n) { d[i] = i % dim == mll_label(labels, i / dim, dim) ? __fdiv_rn(-scale, fmaxf(p[i], 1e-20f)) : 0.0f; }
}

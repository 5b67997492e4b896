// Softmax with loss and accuracy on the GPU, one thread per sample (the
// class count of a classifier is small): probabilities kept for backward,
// each sample's loss -ln p[label] (floored at the smallest normal float, as
// the CPU layer does) and whether it is right within top_k; the host sums
// the per-sample values. Backward writes scale * (p - onehot(label)).

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

__device__ unsigned label_of(const float* labels, unsigned i, unsigned classes) {
  unsigned y = (unsigned)labels[i];
  return y < classes ? y : classes - 1;
}

extern "C" __global__ void softmax_loss_forward(const float* z, const float* labels, float* prob, float* loss,
                                                unsigned num, unsigned classes) {
  FOR_EACH(i, num) {
    const float* zi = z + (size_t)i * classes;
    float* p = prob + (size_t)i * classes;
    float m = -__int_as_float(0x7f800000);
    for (unsigned k = 0; k < classes; ++k) m = fmaxf(m, zi[k]);
    float sum = 0.0f;
    for (unsigned k = 0; k < classes; ++k) {
      p[k] = expf(zi[k] - m);
      sum += p[k];
    }
    for (unsigned k = 0; k < classes; ++k) p[k] /= sum;
    loss[i] = -logf(fmaxf(p[label_of(labels, i, classes)], 1.17549435e-38f));
  }
}

extern "C" __global__ void softmax_loss_backward(const float* prob, const float* labels, float* dz, unsigned num,
                                                 unsigned classes, float scale) {
  unsigned n = num * classes;
  FOR_EACH(i, n) {
    unsigned s = i / classes, k = i % classes;
    dz[i] = scale * (prob[i] - (k == label_of(labels, s, classes) ? 1.0f : 0.0f));
  }
}

// correct[i] = 1 when fewer than top_k classes score at least the true class's score (besides itself).
extern "C" __global__ void accuracy(const float* z, const float* labels, float* correct, unsigned num,
                                    unsigned classes, unsigned top_k) {
  FOR_EACH(i, num) {
    const float* zi = z + (size_t)i * classes;
    float truth = zi[label_of(labels, i, classes)];
    unsigned better = 0;
    for (unsigned k = 0; k < classes; ++k) better += zi[k] >= truth ? 1u : 0u;
    correct[i] = better - 1 < top_k ? 1.0f : 0.0f;
  }
}

// ContrastiveLoss on the GPU, one thread per item for its squared distance
// (summed in the CPU layer's order, no fused multiply-add) and one per
// value for the gradient. Forward writes each item's squared distance and
// similarity; the host finishes the loss in f64 in item order, as the CPU
// layer does. Backward first writes each item's gradient scale for bottom
// a (b's is its negation), with Caffe's 1e-4 guard, then the gradients:
// the CPU layer's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

__device__ float contrastive_dist_sq(const float* a, const float* b, unsigned i, unsigned dim) {
  float d2 = 0.0f;
  for (unsigned k = 0; k < dim; ++k) {
    float t = __fsub_rn(a[(size_t)i * dim + k], b[(size_t)i * dim + k]);
    d2 = __fadd_rn(d2, __fmul_rn(t, t));
  }
  return d2;
}

// out[2i] = item i's squared distance, out[2i + 1] = 1 when the pair is similar (y as an int non-zero).
extern "C" __global__ void contrastive_forward(const float* a, const float* b, const float* sim, float* out,
                                               unsigned num, unsigned dim) {
  FOR_EACH(i, num) {
    out[2 * i] = contrastive_dist_sq(a, b, i, dim);
    out[2 * i + 1] = (int)sim[i] != 0 ? 1.0f : 0.0f;
  }
}

// scale[i]: a bottom's gradient factor of item i, alpha = ±loss_weight / num (+ for a, - for b).
extern "C" __global__ void contrastive_scales(const float* a, const float* b, const float* sim, float* scale,
                                              unsigned num, unsigned dim, float margin, unsigned legacy,
                                              float alpha) {
  FOR_EACH(i, num) {
    if ((int)sim[i] != 0) {
      scale[i] = alpha;
      continue;
    }
    float d2 = contrastive_dist_sq(a, b, i, dim), mdist, beta;
    if (legacy) {
      mdist = __fsub_rn(margin, d2);
      beta = -alpha;
    } else {
      float dist = sqrtf(d2);
      mdist = __fsub_rn(margin, dist);
      beta = __fdiv_rn(__fmul_rn(-alpha, mdist), __fadd_rn(dist, 1e-4f));
    }
    scale[i] = mdist > 0.0f ? beta : 0.0f;
  }
}

// d = scale[item] * (a - b).
extern "C" __global__ void contrastive_backward(const float* a, const float* b, const float* scale, float* d,
                                                unsigned num, unsigned dim) {
  unsigned n = num * dim;
  FOR_EACH(i, n) { d[i] = __fmul_rn(scale[i / dim], __fsub_rn(a[i], b[i])); }
}

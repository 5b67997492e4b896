// Elementwise activations of caffe-geeps on the GPU, in place as the CPU
// layers run them: forward rewrites the blob, backward scales the top
// gradient (already in the bottom gradient's memory) by the derivative,
// read from the top data. One thread per element, grid-stride loops.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void relu_forward(float* y, unsigned n, float slope) {
  FOR_EACH(i, n) {
    float v = y[i];
    y[i] = v > 0.0f ? v : v * slope;
  }
}

extern "C" __global__ void relu_backward(const float* y, float* d, unsigned n, float slope) {
  FOR_EACH(i, n) { d[i] *= y[i] > 0.0f ? 1.0f : slope; }
}

extern "C" __global__ void sigmoid_forward(float* y, unsigned n) {
  FOR_EACH(i, n) { y[i] = 1.0f / (1.0f + expf(-y[i])); }
}

extern "C" __global__ void sigmoid_backward(const float* y, float* d, unsigned n) {
  FOR_EACH(i, n) {
    float t = y[i];
    d[i] *= t * (1.0f - t);
  }
}

extern "C" __global__ void tanh_forward(float* y, unsigned n) {
  FOR_EACH(i, n) { y[i] = tanhf(y[i]); }
}

extern "C" __global__ void tanh_backward(const float* y, float* d, unsigned n) {
  FOR_EACH(i, n) {
    float t = y[i];
    d[i] *= 1.0f - t * t;
  }
}

// Caffe's dropout at train time: a unit is kept when its uniform draw is at
// least `ratio`, and then scaled by `scale` = 1 / (1 - ratio); the mask
// (scale or 0) is kept for backward. The draw is splitmix64 of the call's
// seed and the element's index, the same function as the CPU layer's, so
// both keep the same units.
__device__ float dropout_uniform(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed + (i + 1ULL) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (float)(unsigned)(z >> 40) * (1.0f / 16777216.0f);
}

extern "C" __global__ void dropout_forward(float* y, float* mask, unsigned n, float ratio, float scale,
                                           unsigned long long seed) {
  FOR_EACH(i, n) {
    float m = dropout_uniform(seed, i) >= ratio ? scale : 0.0f;
    mask[i] = m;
    y[i] *= m;
  }
}

extern "C" __global__ void dropout_backward(const float* mask, float* d, unsigned n) {
  FOR_EACH(i, n) { d[i] *= mask[i]; }
}

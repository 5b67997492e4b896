// Crop on the GPU: one thread per top value, copied from (forward) or to
// (backward, into a bottom gradient the caller has zeroed) its place in the
// bottom. The crop window is given as up to six axes (the layer merges
// axes the window does not cut): the top's sizes of axes 1 to 5, the
// bottom's strides of axes 0 to 5 and the window's start, so top index i
// lands at base + sum of its axis indexes times the bottom's strides. The
// window is one-to-one, so neither kernel races; copies only, so the CPU
// layer's bits.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

#define WINDOW                                                                                        \
  unsigned d1, unsigned d2, unsigned d3, unsigned d4, unsigned d5, unsigned s0, unsigned s1, unsigned s2, \
      unsigned s3, unsigned s4, unsigned s5, unsigned base

__device__ unsigned crop_source(unsigned i, WINDOW) {
  unsigned r = i, at = base;
  at += (r % d5) * s5;
  r /= d5;
  at += (r % d4) * s4;
  r /= d4;
  at += (r % d3) * s3;
  r /= d3;
  at += (r % d2) * s2;
  r /= d2;
  at += (r % d1) * s1;
  r /= d1;
  return at + r * s0;
}

extern "C" __global__ void crop_forward(const float* x, float* y, unsigned n, WINDOW) {
  FOR_EACH(i, n) { y[i] = x[crop_source(i, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5, base)]; }
}

extern "C" __global__ void crop_backward(const float* dy, float* dx, unsigned n, WINDOW) {
  FOR_EACH(i, n) { dx[crop_source(i, d1, d2, d3, d4, d5, s0, s1, s2, s3, s4, s5, base)] = dy[i]; }
}

// Caffe's Power on the GPU, one thread per value, with the CPU layer's
// formula and roundings (no fused multiply-add); powf differs from the
// CPU's by a few ulps.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// y = (shift + scale * x)^power, 1 when power is 0.
extern "C" __global__ void power_forward(const float* x, float* y, unsigned n, float power, float scale, float shift) {
  FOR_EACH(i, n) { y[i] = power == 0.0f ? 1.0f : powf(__fadd_rn(shift, __fmul_rn(scale, x[i])), power); }
}

// dx = dy * k * (shift + scale * x)^(power - 1), k = power * scale (0 when k is 0, dy * scale when power is 1).
extern "C" __global__ void power_backward(const float* x, const float* dy, float* dx, unsigned n, float power,
                                          float scale, float shift, float k, float power_minus_one) {
  FOR_EACH(i, n) {
    float g = dy[i];
    float d;
    if (k == 0.0f) {
      d = 0.0f;
    } else if (power == 1.0f) {
      d = __fmul_rn(g, scale);
    } else {
      d = __fmul_rn(__fmul_rn(g, k), powf(__fadd_rn(shift, __fmul_rn(scale, x[i])), power_minus_one));
    }
    dx[i] = d;
  }
}

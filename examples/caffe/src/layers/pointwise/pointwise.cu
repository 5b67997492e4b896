// AbsVal, BNLL, Log and Threshold on the GPU, out of place, one thread per
// value; backward scales the top gradient by the slope at the input.
// AbsVal and Threshold give the CPU layer's bits; BNLL and Log use the
// device's expf/log1pf/logf (a few ulps from the CPU's).
//
// op: 0 AbsVal, 1 BNLL, 2 Log (a = shift, b = scale, c = ln base), 3 Threshold (a = threshold).

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// Caffe's BNLL clamp: e^x beyond it would overflow.
#define BNLL_THRESHOLD 50.0f

extern "C" __global__ void pointwise_forward(const float* x, float* y, unsigned n, unsigned op, float a, float b,
                                             float c) {
  FOR_EACH(i, n) {
    float v = x[i], out;
    if (op == 0)
      out = fabsf(v);
    else if (op == 1)
      out = v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(fminf(v, BNLL_THRESHOLD)));
    else if (op == 2)
      out = __fdiv_rn(logf(__fadd_rn(a, __fmul_rn(b, v))), c);
    else
      out = v > a ? 1.0f : 0.0f;
    y[i] = out;
  }
}

extern "C" __global__ void pointwise_backward(const float* x, const float* dy, float* dx, unsigned n, unsigned op,
                                              float a, float b, float c) {
  FOR_EACH(i, n) {
    float v = x[i], slope;
    if (op == 0) {
      slope = (float)(v > 0.0f) - (float)(v < 0.0f);
    } else if (op == 1) {
      float e = expf(fminf(v, BNLL_THRESHOLD));
      slope = e / (e + 1.0f);
    } else if (op == 2) {
      slope = __fdiv_rn(b, __fmul_rn(__fadd_rn(a, __fmul_rn(b, v)), c));
    } else {
      slope = 0.0f;
    }
    dx[i] = __fmul_rn(dy[i], slope);
  }
}

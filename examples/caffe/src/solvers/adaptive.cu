// The adaptive solvers' step on the GPU (AdaGrad, RMSProp, AdaDelta, Adam),
// in the CPU solver's order and rounding (each product and sum rounded on its
// own, no fused multiply-add; IEEE square root and division), so both give the
// same bits. First the gradient is prepared as for SGD: g <- scale * (g *
// factor + decay * reg(w)), reg(w) = w or sign(w) (l1 != 0). Then, with h and
// h2 the solver's histories:
//   kind 0, AdaGrad:  h += g*g;                      u = rate * (g / (sqrt(h) + delta))
//   kind 1, RMSProp:  h = (1-b1)*g*g + b1*h;         u = rate * (g / (sqrt(h) + delta))
//   kind 2, AdaDelta: h = (1-b1)*g*g + b1*h;         v = g * sqrt((h2 + delta) / (h + delta));
//                     h2 = (1-b1)*v*v + b1*h2;       u = rate * v
//   kind 3, Adam:     h = (1-b1)*g + b1*h;           h2 = (1-b2)*g*g + b2*h2;
//                     u = rate * correction * (h / (sqrt(h2) + delta))
// and -u is written over the gradient (the delta geeps adds).
#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

__device__ float sq_scaled(float c, float g) { return __fmul_rn(__fmul_rn(c, g), g); }

extern "C" __global__ void adaptive_step(const float* w, float* grad_delta, float* h, float* h2, unsigned n,
                                         float factor, float decay, unsigned l1, float scale, float rate,
                                         unsigned kind, float delta, float b1, float b2, float correction) {
  FOR_EACH(i, n) {
    float wi = w[i];
    float reg = l1 ? (float)((0.0f < wi) - (wi < 0.0f)) : wi;
    float g = __fmul_rn(scale, __fadd_rn(__fmul_rn(grad_delta[i], factor), __fmul_rn(decay, reg)));
    float u;
    if (kind == 0) {
      float hi = __fadd_rn(h[i], __fmul_rn(g, g));
      h[i] = hi;
      u = __fmul_rn(rate, __fdiv_rn(g, __fadd_rn(__fsqrt_rn(hi), delta)));
    } else if (kind == 1) {
      float hi = __fadd_rn(sq_scaled(__fsub_rn(1.0f, b1), g), __fmul_rn(b1, h[i]));
      h[i] = hi;
      u = __fmul_rn(rate, __fdiv_rn(g, __fadd_rn(__fsqrt_rn(hi), delta)));
    } else if (kind == 2) {
      float m = __fsub_rn(1.0f, b1);
      float hi = __fadd_rn(sq_scaled(m, g), __fmul_rn(b1, h[i]));
      h[i] = hi;
      float v = __fmul_rn(g, __fsqrt_rn(__fdiv_rn(__fadd_rn(h2[i], delta), __fadd_rn(hi, delta))));
      h2[i] = __fadd_rn(sq_scaled(m, v), __fmul_rn(b1, h2[i]));
      u = __fmul_rn(rate, v);
    } else {
      float mi = __fadd_rn(__fmul_rn(__fsub_rn(1.0f, b1), g), __fmul_rn(b1, h[i]));
      float vi = __fadd_rn(sq_scaled(__fsub_rn(1.0f, b2), g), __fmul_rn(b2, h2[i]));
      h[i] = mi;
      h2[i] = vi;
      u = __fmul_rn(__fmul_rn(rate, correction), __fdiv_rn(mi, __fadd_rn(__fsqrt_rn(vi), delta)));
    }
    grad_delta[i] = -u;
  }
}

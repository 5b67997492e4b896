// Tile's backward on the GPU (its forward is Concat's row copies): one
// thread per bottom value sums the gradients of its copies in copy order
// from 0, as the CPU layer adds them, with no fused multiply-add: the CPU
// layer's bits. The top gradient is (outer, tiles, inner).

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void tile_backward(const float* dy, float* dx, unsigned outer, unsigned inner,
                                         unsigned tiles) {
  unsigned n = outer * inner;
  FOR_EACH(i, n) {
    unsigned o = i / inner, k = i % inner;
    float sum = 0.0f;
    for (unsigned t = 0; t < tiles; ++t) sum = __fadd_rn(sum, dy[((size_t)o * tiles + t) * inner + k]);
    dx[i] = sum;
  }
}

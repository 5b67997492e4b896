// Concat's copies on the GPU: `rows` runs of `len` floats from rows
// `src_ld` apart to rows `dst_ld` apart, one thread per float (forward
// copies a bottom into its columns of the top, backward the reverse).

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

extern "C" __global__ void copy_rows(const float* src, unsigned src_ld, float* dst, unsigned dst_ld, unsigned rows,
                                     unsigned len) {
  unsigned n = rows * len;
  FOR_EACH(i, n) {
    unsigned r = i / len, k = i % len;
    dst[(size_t)r * dst_ld + k] = src[(size_t)r * src_ld + k];
  }
}

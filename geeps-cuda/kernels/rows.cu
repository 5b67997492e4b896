// Row kernels of the CUDA device: gather rows of a store into an access
// buffer, and scatter a buffer back (assign or add), through an index of
// (buffer_row, store_row) pairs stored as interleaved u32.
//
// Launch shape (computed by geeps-cuda/src/launch.rs): blockDim.x threads walk
// the columns of one row, blockDim.y rows share a block, gridDim.x blocks
// cover the pairs. The last block may be partial (`p >= pairs`) and the row
// width need not be a multiple of blockDim.x (the column loop stops at width).
//
// No atomics: within one launch every buffer_row and every store_row is
// distinct (the engine builds indexes that way; upload_index checks it), so
// no two threads write the same float.
//
// These kernels are compiled to PTX by build_ptx.py and executed on the CPU
// by an interpreter in CI, so they stay within plain integer and f32
// arithmetic, scalar loads and stores, and no loop unrolling.

typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void geeps_gather(const float* store, const u32* index, u32 pairs, float* buffer, u32 width) {
    u32 p = blockIdx.x * blockDim.y + threadIdx.y;
    if (p >= pairs) return;
    u32 b = index[2 * p];
    u32 s = index[2 * p + 1];
    const float* src = store + (u64)s * width;
    float* dst = buffer + (u64)b * width;
#pragma unroll 1
    for (u32 c = threadIdx.x; c < width; c += blockDim.x) dst[c] = src[c];
}

extern "C" __global__ void geeps_scatter_assign(const float* buffer, const u32* index, u32 pairs, float* store, u32 width) {
    u32 p = blockIdx.x * blockDim.y + threadIdx.y;
    if (p >= pairs) return;
    u32 b = index[2 * p];
    u32 s = index[2 * p + 1];
    const float* src = buffer + (u64)b * width;
    float* dst = store + (u64)s * width;
#pragma unroll 1
    for (u32 c = threadIdx.x; c < width; c += blockDim.x) dst[c] = src[c];
}

extern "C" __global__ void geeps_scatter_add(const float* buffer, const u32* index, u32 pairs, float* store, u32 width) {
    u32 p = blockIdx.x * blockDim.y + threadIdx.y;
    if (p >= pairs) return;
    u32 b = index[2 * p];
    u32 s = index[2 * p + 1];
    const float* src = buffer + (u64)b * width;
    float* dst = store + (u64)s * width;
#pragma unroll 1
    for (u32 c = threadIdx.x; c < width; c += blockDim.x) dst[c] = dst[c] + src[c];
}

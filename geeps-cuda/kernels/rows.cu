// Row kernels of the CUDA device: gather rows of a store into an access
// buffer, and scatter a buffer back (assign or add), through an index of
// (buffer_row, store_row) pairs stored as interleaved u32.
//
// Launch shape (computed by geeps-cuda/src/launch.rs): blockDim.x threads walk
// the columns of one row, blockDim.y rows share a block, and the grid strides
// over the pairs, so a grid of any size covers every pair (the grid is
// bounded; large indexes take several rounds).
//
// Columns move as 16-byte float4 when every row of both sides starts 16-byte
// aligned (the width a multiple of 4 and both base pointers aligned: the
// driver's allocations are 256-byte aligned, so this is the usual case), and
// as single floats otherwise. The test is uniform across the launch, so
// threads never diverge on it. Either way each float is one copy, or one f32
// `dst + src`: the bits do not depend on the path.
//
// No atomics: within one launch every buffer_row and every store_row is
// distinct (the engine builds indexes that way; upload_index checks it), so
// no two threads write the same float.

typedef unsigned int u32;
typedef unsigned long long u64;

// Moves rows `from` -> `to`: the source row of pair p is index[2p + from_slot],
// the destination row the other element of the pair. ADD adds instead of copying.
template <bool ADD>
static __device__ __forceinline__ void move_rows(const float* from, const u32* index, u32 pairs, float* to, u32 width,
                                                 u32 from_slot) {
    const u32 stride = gridDim.x * blockDim.y;
    const bool vectors = (width & 3) == 0 && (((u64)from | (u64)to) & 15) == 0;
    for (u32 p = blockIdx.x * blockDim.y + threadIdx.y; p < pairs; p += stride) {
        const u64 f = index[2 * p + from_slot];
        const u64 t = index[2 * p + 1 - from_slot];
        if (vectors) {
            const u32 quads = width >> 2;
            const float4* src = (const float4*)(from + f * width);
            float4* dst = (float4*)(to + t * width);
            for (u32 c = threadIdx.x; c < quads; c += blockDim.x) {
                float4 v = src[c];
                if (ADD) {
                    const float4 d = dst[c];
                    v.x = d.x + v.x;
                    v.y = d.y + v.y;
                    v.z = d.z + v.z;
                    v.w = d.w + v.w;
                }
                dst[c] = v;
            }
        } else {
            const float* src = from + f * width;
            float* dst = to + t * width;
            for (u32 c = threadIdx.x; c < width; c += blockDim.x) dst[c] = ADD ? dst[c] + src[c] : src[c];
        }
    }
}

extern "C" __global__ void geeps_gather(const float* store, const u32* index, u32 pairs, float* buffer, u32 width) {
    move_rows<false>(store, index, pairs, buffer, width, 1);
}

extern "C" __global__ void geeps_scatter_assign(const float* buffer, const u32* index, u32 pairs, float* store, u32 width) {
    move_rows<false>(buffer, index, pairs, store, width, 0);
}

extern "C" __global__ void geeps_scatter_add(const float* buffer, const u32* index, u32 pairs, float* store, u32 width) {
    move_rows<true>(buffer, index, pairs, store, width, 0);
}

// Block-wide merges through warp shuffles: each warp merges its 32 lanes with __shfl_xor_sync, warp 0
// merges the warps' results from shared memory, and every thread gets the block's result back.
// Any blockDim.x that is a multiple of 32, up to 1024.
#pragma once

#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38f
#endif

struct MaxSum {
    float max;  // running maximum
    float sum;  // sum of exp(x - max) over the elements seen
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    return MaxSum{m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ MaxSum warp_merge_max_sum(MaxSum v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                           __shfl_xor_sync(0xffffffffu, v.sum, offset)};
        v = merge(v, other);
    }
    return v;
}

__device__ __forceinline__ MaxSum block_merge_max_sum(MaxSum v) {
    __shared__ MaxSum partial[32];
    __shared__ MaxSum total;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int warps = (blockDim.x + 31) / 32;
    v = warp_merge_max_sum(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        MaxSum w = lane < warps ? partial[lane] : MaxSum{-FLT_MAX, 0.0f};
        w = warp_merge_max_sum(w);
        if (lane == 0) total = w;
    }
    __syncthreads();
    return total;
}

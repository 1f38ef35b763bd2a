// Softmax over the last dimension of a rows x cols matrix: one block per row (grid-stride over rows),
// two passes over the row. Pass 1 keeps a running (max, sum of exp(x - max)) per thread ("online"
// softmax), merged across the warp with shuffles and across warps through shared memory; pass 2
// writes exp(x - max) / sum. -FLT_MAX (not -inf) starts the max so that merging two empty partials
// never computes inf - inf, also under --use_fast_math.
#include "block_reduce.cuh"

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        MaxSum ms{-FLT_MAX, 0.0f};
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            const float v = xr[j];
            if (v > ms.max) {
                ms.sum = ms.sum * expf(ms.max - v) + 1.0f;
                ms.max = v;
            } else {
                ms.sum += expf(v - ms.max);
            }
        }
        ms = block_merge_max_sum(ms);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - ms.max) / ms.sum;
        __syncthreads();  // the shared scratch of block_merge_max_sum is reused by the next row
    }
}

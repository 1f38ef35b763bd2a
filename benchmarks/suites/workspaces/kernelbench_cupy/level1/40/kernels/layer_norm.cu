// LayerNorm over the trailing `row_len` elements of each of `rows` rows, with the affine weight and bias
// (nn.LayerNorm's defaults: elementwise_affine, biased variance). The task has few, long rows (16 of
// 4 Mi elements), so each row is cut into chunks spread over the GPU, in three launches:
//   ln_partials: per (row, chunk) block, the chunk's sum and sum of squares (float per thread over a
//                few elements, then double through warp shuffles and shared memory);
//   ln_stats:    per row, the chunk partials added in double: mean and 1 / sqrt(var + eps);
//   ln_apply:    y = (x - mean) * rstd * weight + bias.
// Double keeps E[x^2] - mean^2 free of cancellation at these lengths.
constexpr int kThreads = 256;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum of v over the block (kThreads threads); every thread gets it.
__device__ __forceinline__ double block_sum(double v, double* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
    __syncthreads();  // scratch may be reused right after
    return total;
}

extern "C" __global__ void __launch_bounds__(kThreads)
ln_partials(const float* __restrict__ x, double* __restrict__ partials, long long rows, long long row_len,
            long long chunk_len) {
    __shared__ double scratch[kThreads / 32];
    const long long chunk = blockIdx.x;  // gridDim.x is the number of chunks of a row
    const long long begin = chunk * chunk_len;
    const long long end = min(begin + chunk_len, row_len);
    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const float* xr = x + row * row_len;
        float sum = 0.0f, sum_sq = 0.0f;
        for (long long j = begin + threadIdx.x; j < end; j += kThreads) {
            const float v = xr[j];
            sum += v;
            sum_sq = fmaf(v, v, sum_sq);
        }
        const double s = block_sum((double)sum, scratch);
        const double ss = block_sum((double)sum_sq, scratch);
        if (threadIdx.x == 0) {
            double* out = partials + (row * gridDim.x + chunk) * 2;
            out[0] = s;
            out[1] = ss;
        }
    }
}

extern "C" __global__ void __launch_bounds__(kThreads)
ln_stats(const double* __restrict__ partials, float* __restrict__ stats, long long chunks, long long row_len,
         double eps) {
    __shared__ double scratch[kThreads / 32];
    const long long row = blockIdx.x;
    const double* pr = partials + row * chunks * 2;
    double s = 0.0, ss = 0.0;
    for (long long c = threadIdx.x; c < chunks; c += kThreads) {
        s += pr[c * 2];
        ss += pr[c * 2 + 1];
    }
    s = block_sum(s, scratch);
    ss = block_sum(ss, scratch);
    if (threadIdx.x == 0) {
        const double mean = s / (double)row_len;
        const double var = fmax(ss / (double)row_len - mean * mean, 0.0);
        stats[row * 2] = (float)mean;
        stats[row * 2 + 1] = (float)(1.0 / sqrt(var + eps));
    }
}

extern "C" __global__ void __launch_bounds__(kThreads)
ln_apply(const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
         const float* __restrict__ stats, float* __restrict__ y, long long rows, long long row_len) {
    const long long stride = (long long)gridDim.x * kThreads;
    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const float mean = stats[row * 2], rstd = stats[row * 2 + 1];
        const float* xr = x + row * row_len;
        float* yr = y + row * row_len;
        for (long long j = (long long)blockIdx.x * kThreads + threadIdx.x; j < row_len; j += stride) {
            yr[j] = (xr[j] - mean) * rstd * weight[j] + bias[j];
        }
    }
}

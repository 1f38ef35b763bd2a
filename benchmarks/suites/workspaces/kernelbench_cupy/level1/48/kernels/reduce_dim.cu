// Sum over the middle axis of x viewed as (outer, R, inner), divided by `divisor` (1 for a sum, R for a
// mean): y[o][i] = (sum_r x[o][r][i]) / divisor. A block of 32 x 8 threads owns 32 neighbouring i (a
// warp reads 32 consecutive floats of one r: coalesced); its 8 rows of threads split r, and shared
// memory adds their 8 partial sums in a fixed order. 64-bit offsets throughout.
constexpr int kLanes = 32;
constexpr int kSlices = 8;

extern "C" __global__ void __launch_bounds__(kLanes * kSlices)
reduce_dim(const float* __restrict__ x, float* __restrict__ y, long long outer, long long r_len,
           long long inner, float divisor) {
    __shared__ float partial[kSlices][kLanes + 1];
    const long long i = (long long)blockIdx.x * kLanes + threadIdx.x;
    for (long long o = blockIdx.y; o < outer; o += gridDim.y) {
        float acc = 0.0f;
        if (i < inner) {
            const float* base = x + o * r_len * inner + i;
            for (long long r = threadIdx.y; r < r_len; r += kSlices) acc += base[r * inner];
        }
        partial[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && i < inner) {
            float total = 0.0f;
#pragma unroll
            for (int s = 0; s < kSlices; ++s) total += partial[s][threadIdx.x];
            y[o * inner + i] = total / divisor;
        }
        __syncthreads();  // partial is rewritten for the next o
    }
}

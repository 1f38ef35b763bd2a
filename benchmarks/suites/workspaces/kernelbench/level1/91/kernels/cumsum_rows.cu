// Inclusive prefix sums along each row (last dimension), forwards or backwards: one block per row walks
// the row in tiles of 4 elements per thread; each tile is scanned in the block (a thread's 4 values,
// then warp shuffles, then the warps' totals) and offset by the running total of the tiles before it.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 512;
constexpr int kPerThread = 4;
constexpr int kTile = kThreads * kPerThread;

__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, bool reverse) {
  __shared__ float warp_totals[kThreads / 32];
  __shared__ float carry;
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  if (threadIdx.x == 0) carry = 0.f;
  __syncthreads();
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t tile = 0; tile < cols; tile += kTile) {
    float v[kPerThread];
    float local = 0.f;
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      int64_t j = tile + threadIdx.x * kPerThread + k;  // position in scan order
      int64_t col = reverse ? cols - 1 - j : j;
      v[k] = j < cols ? row[col] : 0.f;
      local += v[k];
      v[k] = local;  // inclusive within the thread
    }
    float scan = local;  // inclusive scan of the threads' totals within the warp
    for (int o = 1; o < 32; o <<= 1) {
      float up = __shfl_up_sync(0xffffffffu, scan, o);
      if (lane >= o) scan += up;
    }
    if (lane == 31) warp_totals[warp] = scan;
    __syncthreads();
    if (warp == 0) {
      float t = lane < kThreads / 32 ? warp_totals[lane] : 0.f;
      for (int o = 1; o < 32; o <<= 1) {
        float up = __shfl_up_sync(0xffffffffu, t, o);
        if (lane >= o) t += up;
      }
      if (lane < kThreads / 32) warp_totals[lane] = t;  // inclusive over warps
    }
    __syncthreads();
    float before = carry + (warp > 0 ? warp_totals[warp - 1] : 0.f) + (scan - local);
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      int64_t j = tile + threadIdx.x * kPerThread + k;
      if (j < cols) out[reverse ? cols - 1 - j : j] = before + v[k];
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += warp_totals[kThreads / 32 - 1];
    __syncthreads();
  }
}

extern "C" int cumsum_rows_launcher(const float* x, float* y, int64_t rows, int64_t cols, bool reverse,
                                    cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  cumsum_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols, reverse);
  return static_cast<int>(cudaGetLastError());
}

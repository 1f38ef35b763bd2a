// Row sums of a (rows, cols) matrix: one block per row, warp shuffles, then one warp over the partials.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
  const float* row = x + blockIdx.x * cols;
  float acc = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) acc += row[j];

  __shared__ float partial[kThreads / 32];
  acc = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.f;
    acc = warp_sum(acc);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
  }
}

extern "C" void row_sum_launcher(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return;
  row_sum_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, out, cols);
}

// x / mean(|x|) per row: one block per row; a block-wide sum of |x|, then one pass writes x / norm.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 1024;

__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float w = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    if (threadIdx.x == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

__global__ void l1_normalize_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float scratch[kThreads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float acc = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    float v = row[j];
    acc += fabsf(v);
  }
  float total = block_sum(acc, scratch);
  float inv = static_cast<float>(cols) / total;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = row[j] * inv;
}

extern "C" int l1_normalize_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  l1_normalize_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
  return static_cast<int>(cudaGetLastError());
}

// Row softmax over the last dimension: one block per row. One pass keeps a running (max, sum of exp)
// per thread (online softmax), a block-wide combine, then one pass writes the outputs.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

constexpr int kThreads = 1024;

struct MaxSum {
  float m;
  float s;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -FLT_MAX) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ MaxSum block_combine(MaxSum v, MaxSum* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = combine(v, other);
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum w = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : MaxSum{-FLT_MAX, 0.f};
    for (int o = 16; o > 0; o >>= 1) {
      MaxSum other{__shfl_xor_sync(0xffffffffu, w.m, o), __shfl_xor_sync(0xffffffffu, w.s, o)};
      w = combine(w, other);
    }
    if (threadIdx.x == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ MaxSum scratch[kThreads / 32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  MaxSum acc{-FLT_MAX, 0.f};
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    float v = row[j];
    if (v > acc.m) {
      acc.s = acc.s * __expf(acc.m - v) + 1.f;
      acc.m = v;
    } else {
      acc.s += __expf(v - acc.m);
    }
  }
  MaxSum total = block_combine(acc, scratch);
  float inv = 1.f / total.s;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = __expf(row[j] - total.m) * inv;
}

extern "C" int softmax_rows_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  softmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
  return static_cast<int>(cudaGetLastError());
}

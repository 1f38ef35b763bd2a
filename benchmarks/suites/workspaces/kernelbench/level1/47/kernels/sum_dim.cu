// Sum of a (B, R, C) tensor over its middle dimension: one thread per (b, c), a loop over r. Threads of
// a warp take consecutive c, so every step of the loop reads 128 consecutive bytes per warp.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t batches, int64_t reduce,
                              int64_t inner) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < batches * inner; t += stride) {
    int64_t b = t / inner, c = t % inner;
    const float* p = x + b * reduce * inner + c;
    float acc = 0.f;
    #pragma unroll 8
    for (int64_t r = 0; r < reduce; ++r) {
      float v = p[r * inner];
      acc += v;
    }
    y[t] = acc;
  }
}

extern "C" int sum_dim_launcher(const float* x, float* y, int64_t batches, int64_t reduce, int64_t inner,
                               cudaStream_t stream) {
  int64_t work = batches * inner;
  if (work == 0) return 0;
  const int threads = 256;
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 132 * 64) blocks = 132 * 64;
  sum_dim_kernel<<<static_cast<int>(blocks), threads, 0, stream>>>(x, y, batches, reduce, inner);
  return static_cast<int>(cudaGetLastError());
}

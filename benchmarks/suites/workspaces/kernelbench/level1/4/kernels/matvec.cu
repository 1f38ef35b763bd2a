// Matrix-vector product y = A x (A is M x K, x is K x 1), written out rather than through cuBLAS: each block computes
// whole rows, its threads striding along the row (coalesced), four partial sums per thread, then a shuffle tree across
// the warp and the block (no atomics: the result is the same on every call). The 8 GiB matrix is read once; x (4 MiB
// at the task's size) is read by every block and stays in L2. 16-byte loads where K is a multiple of 4 and both
// operands are 16-byte aligned (then every row is too); a scalar path for any other shape or alignment.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 132 * 32;

// The block's total, valid in thread 0. `scratch` holds a value per warp; the caller syncs before reusing it.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads) matvec_vec4_kernel(const float4* __restrict__ a,
                                                               const float4* __restrict__ x, float* __restrict__ y,
                                                               int64_t rows, int64_t k4) {
  __shared__ float scratch[kWarps];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float4* r = a + row * k4;
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < k4; i += kThreads) {
      const float4 u = r[i];
      const float4 v = __ldg(x + i);
      s0 = fmaf(u.x, v.x, s0);
      s1 = fmaf(u.y, v.y, s1);
      s2 = fmaf(u.z, v.z, s2);
      s3 = fmaf(u.w, v.w, s3);
    }
    const float total = block_sum((s0 + s1) + (s2 + s3), scratch);
    if (threadIdx.x == 0) y[row] = total;
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads) matvec_scalar_kernel(const float* __restrict__ a,
                                                                 const float* __restrict__ x, float* __restrict__ y,
                                                                 int64_t rows, int64_t k) {
  __shared__ float scratch[kWarps];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* r = a + row * k;
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    int64_t i = threadIdx.x;
    for (; i + 3 * kThreads < k; i += 4 * kThreads) {
      s0 = fmaf(r[i], __ldg(x + i), s0);
      s1 = fmaf(r[i + kThreads], __ldg(x + i + kThreads), s1);
      s2 = fmaf(r[i + 2 * kThreads], __ldg(x + i + 2 * kThreads), s2);
      s3 = fmaf(r[i + 3 * kThreads], __ldg(x + i + 3 * kThreads), s3);
    }
    for (; i < k; i += kThreads) s0 = fmaf(r[i], __ldg(x + i), s0);
    const float total = block_sum((s0 + s1) + (s2 + s3), scratch);
    if (threadIdx.x == 0) y[row] = total;
    __syncthreads();
  }
}

extern "C" int matvec_launcher(const float* a, const float* x, float* y, int64_t rows, int64_t k, cudaStream_t stream) {
  if (rows == 0) return 0;
  const int blocks = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  const bool aligned = (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(x)) % 16 == 0;
  if (aligned && k % 4 == 0) {
    matvec_vec4_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(a),
                                                         reinterpret_cast<const float4*>(x), y, rows, k / 4);
  } else {
    matvec_scalar_kernel<<<blocks, kThreads, 0, stream>>>(a, x, y, rows, k);
  }
  return static_cast<int>(cudaGetLastError());
}

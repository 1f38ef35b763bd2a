// KL divergence F.kl_div(log(p), t, reduction='batchmean') = sum(t * (log t - log p)) / batch, in two launches on
// one stream, no atomics (the same bits on every call):
//   1. a fixed grid of blocks, each thread adding its grid-stride share of the elements' terms in double (16-byte
//      loads where both inputs are 16-byte aligned, then the scalar tail), a shuffle tree across the block, one
//      partial per block;
//   2. one block adds the partials in a fixed tree and divides by the batch size.
// Each term is t * log(t / p) rather than the reference's xlogy(t, t) - t * log(p): the same value, but the logarithm
// of a ratio near 1 is far better conditioned than the difference of two nearly equal products (under
// --use_fast_math, logf is the hardware approximation, a few ulp of log t ~ -10 at the task's sizes). The special
// values follow PyTorch's: t == 0 gives 0 * log(p) (0, or NaN where p <= 0), p == 0 < t gives +inf, t < 0 or p < 0
// give NaN.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocks = 132 * 8;

__device__ __forceinline__ float term(float p, float t) { return t == 0.f ? 0.f * __logf(p) : t * __logf(t / p); }

__device__ __forceinline__ void block_store(double acc, double* __restrict__ partial) {
  __shared__ double scratch[kWarps];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < kWarps ? scratch[threadIdx.x] : 0.0;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
  }
}

__global__ void __launch_bounds__(kThreads) kl_div_partial_kernel(const float* __restrict__ p,
                                                                  const float* __restrict__ t, int64_t n, bool vector,
                                                                  double* __restrict__ partial) {
  double acc = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  int64_t done = 0;
  if (vector) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    const int64_t n4 = n / 4;
#pragma unroll 2
    for (int64_t i = first; i < n4; i += stride) {
      const float4 a = p4[i];
      const float4 b = t4[i];
      acc += static_cast<double>((term(a.x, b.x) + term(a.y, b.y)) + (term(a.z, b.z) + term(a.w, b.w)));
    }
    done = n4 * 4;
  }
  for (int64_t i = done + first; i < n; i += stride) acc += static_cast<double>(term(p[i], t[i]));
  block_store(acc, partial);
}

__global__ void __launch_bounds__(kThreads) kl_div_finish_kernel(const double* __restrict__ partial, int count,
                                                                 int64_t batch, float* __restrict__ out) {
  __shared__ double scratch[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<float>(scratch[0] / static_cast<double>(batch));
}

// p and t hold n elements each (contiguous, the same shape); `partial` holds kl_div_scratch_doubles() doubles.
extern "C" int kl_div_launcher(const float* p, const float* t, int64_t n, int64_t batch, double* partial, float* out,
                               cudaStream_t stream) {
  const bool vector = (reinterpret_cast<uintptr_t>(p) | reinterpret_cast<uintptr_t>(t)) % 16 == 0;
  kl_div_partial_kernel<<<kBlocks, kThreads, 0, stream>>>(p, t, n, vector, partial);
  kl_div_finish_kernel<<<1, kThreads, 0, stream>>>(partial, kBlocks, batch, out);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int kl_div_scratch_doubles() { return kBlocks; }

// x / ||x||_F over the whole tensor, three launches on one stream and no host synchronisation: per-block
// sums of squares (fp32 per thread, double per block), one block adds the partials into sqrt(total), and
// a scaled copy reads that norm from device memory.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 512;
constexpr int kBlocks = 132 * 8;

__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t n, double* __restrict__ partial) {
  __shared__ double scratch[kThreads / 32];
  float acc = 0.f;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    float v = x[i];
    acc = fmaf(v, v, acc);
  }
  double d = acc;
  for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = d;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
    partial[blockIdx.x] = total;
  }
}

__global__ void finish_norm_kernel(const double* __restrict__ partial, int count, float* __restrict__ norm) {
  __shared__ double scratch[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *norm = static_cast<float>(sqrt(scratch[0]));
}

__global__ void divide_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, const float* norm) {
  float inv = 1.f / *norm;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) y[i] = x[i] * inv;
}

extern "C" int frobenius_launcher(const float* x, float* y, int64_t n, double* partial, float* norm,
                                  cudaStream_t stream) {
  if (n == 0) return 0;
  sum_squares_kernel<<<kBlocks, kThreads, 0, stream>>>(x, n, partial);
  finish_norm_kernel<<<1, kThreads, 0, stream>>>(partial, kBlocks, norm);
  divide_kernel<<<132 * 16, 256, 0, stream>>>(x, y, n, norm);
  return static_cast<int>(cudaGetLastError());
}

extern "C" int frobenius_scratch_doubles() { return kBlocks; }

// LeakyReLU: x if x > 0 else slope * x, elementwise. Grid-stride loops: 16-byte vector loads and stores where both pointers are
// 16-byte aligned, a scalar loop for the rest (any element count, any alignment).
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float apply(float v, float p) { return v > 0.f ? v : v * p; }

__global__ void leaky_relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float p) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i];
    v.x = apply(v.x, p);
    v.y = apply(v.y, p);
    v.z = apply(v.z, p);
    v.w = apply(v.w, p);
    y[i] = v;
  }
}

__global__ void leaky_relu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n,
                                     float p) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = start + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    y[i] = apply(x[i], p);
  }
}

static int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 132 * 32) blocks = 132 * 32;  // enough to fill an H100/H200; the loops do the rest
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

extern "C" int leaky_relu_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream) {
  if (n == 0) return 0;
  const int threads = 256;
  bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    leaky_relu_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                                     reinterpret_cast<float4*>(y), n4, p);
  }
  if (n4 * 4 < n) {
    leaky_relu_scalar_kernel<<<grid_for(n - n4 * 4, threads), threads, 0, stream>>>(x, y, n4 * 4, n, p);
  }
  return static_cast<int>(cudaGetLastError());
}

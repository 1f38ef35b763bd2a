// InstanceNorm2d without affine parameters or running statistics (nn.InstanceNorm2d's defaults: in eval mode it still
// normalises with each instance's own statistics): for each (n, c), y = (x - mean) / sqrt(var + eps) over the H x W
// plane, biased variance. A block per plane (a grid-stride loop over planes): it adds the plane's sum and sum of
// squares in double (fp32 loads, no cancellation to fear), a shuffle tree gives mean and 1 / sqrt(var + eps), then
// the block reads the plane again and writes the output. 16-byte loads and stores where the plane size is a multiple
// of 4 and both pointers are 16-byte aligned (then every plane is); a scalar path otherwise. No atomics.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 132 * 16;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Mean and 1 / sqrt(var + eps) from the threads' sums, in every thread. `scratch` is reused: the caller's next
// write to it comes after a __syncthreads().
__device__ __forceinline__ float2 plane_stats(double s, double q, int64_t count, double eps, double2* scratch) {
  s = warp_sum(s);
  q = warp_sum(q);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = make_double2(s, q);
  __syncthreads();
  if (threadIdx.x < 32) {
    double2 v = threadIdx.x < kWarps ? scratch[threadIdx.x] : make_double2(0.0, 0.0);
    v.x = warp_sum(v.x);
    v.y = warp_sum(v.y);
    if (threadIdx.x == 0) scratch[kWarps] = v;
  }
  __syncthreads();
  const double2 total = scratch[kWarps];
  const double mean = total.x / static_cast<double>(count);
  double var = total.y / static_cast<double>(count) - mean * mean;
  var = var > 0.0 ? var : 0.0;
  return make_float2(static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + eps)));
}

__global__ void __launch_bounds__(kThreads) instance_norm_vec4_kernel(const float4* __restrict__ x,
                                                                      float4* __restrict__ y, int64_t planes,
                                                                      int64_t size4, double eps) {
  __shared__ double2 scratch[kWarps + 1];
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const float4* src = x + plane * size4;
    float4* dst = y + plane * size4;
    double s = 0.0, q = 0.0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < size4; i += kThreads) {
      const float4 v = src[i];
      const double a = v.x, b = v.y, c = v.z, d = v.w;
      s += (a + b) + (c + d);
      q += fma(a, a, b * b) + fma(c, c, d * d);
    }
    const float2 st = plane_stats(s, q, size4 * 4, eps, scratch);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < size4; i += kThreads) {
      float4 v = src[i];
      v.x = (v.x - st.x) * st.y;
      v.y = (v.y - st.x) * st.y;
      v.z = (v.z - st.x) * st.y;
      v.w = (v.w - st.x) * st.y;
      dst[i] = v;
    }
    __syncthreads();  // scratch is rewritten for the next plane
  }
}

__global__ void __launch_bounds__(kThreads) instance_norm_scalar_kernel(const float* __restrict__ x,
                                                                        float* __restrict__ y, int64_t planes,
                                                                        int64_t size, double eps) {
  __shared__ double2 scratch[kWarps + 1];
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const float* src = x + plane * size;
    float* dst = y + plane * size;
    double s = 0.0, q = 0.0;
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < size; i += kThreads) {
      const double v = src[i];
      s += v;
      q = fma(v, v, q);
    }
    const float2 st = plane_stats(s, q, size, eps, scratch);
#pragma unroll 4
    for (int64_t i = threadIdx.x; i < size; i += kThreads) dst[i] = (src[i] - st.x) * st.y;
    __syncthreads();
  }
}

// x and y (planes x size), contiguous.
extern "C" int instance_norm_launcher(const float* x, float* y, int64_t planes, int64_t size, double eps,
                                      cudaStream_t stream) {
  if (planes == 0 || size == 0) return 0;
  const int blocks = static_cast<int>(planes < kMaxBlocks ? planes : kMaxBlocks);
  const bool aligned = (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  if (aligned && size % 4 == 0) {
    instance_norm_vec4_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                               reinterpret_cast<float4*>(y), planes, size / 4, eps);
  } else {
    instance_norm_scalar_kernel<<<blocks, kThreads, 0, stream>>>(x, y, planes, size, eps);
  }
  return static_cast<int>(cudaGetLastError());
}

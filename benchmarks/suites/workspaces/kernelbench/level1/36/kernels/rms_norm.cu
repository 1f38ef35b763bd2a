// RMSNorm over the channel dimension of (B, C, ...): x / sqrt(mean over C of x^2 + eps). One thread per
// (b, position); consecutive threads take consecutive positions, so each channel's loads are coalesced.
// Up to 64 channels are held in registers (one read of x, one write); more fall back to a second read.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kMaxHeld = 64;

__global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t batches, int64_t channels,
                                int64_t inner, float eps) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < batches * inner; t += stride) {
    int64_t b = t / inner, s = t % inner;
    const float* p = x + b * channels * inner + s;
    float* q = y + b * channels * inner + s;
    float held[kMaxHeld];
    float sum = 0.f;
    if (channels <= kMaxHeld) {
#pragma unroll
      for (int c = 0; c < kMaxHeld; ++c) {
        if (c < channels) {
          held[c] = p[c * inner];
          sum += held[c] * held[c];
        }
      }
      float inv = rsqrtf(sum / static_cast<float>(channels) + eps);
#pragma unroll
      for (int c = 0; c < kMaxHeld; ++c) {
        if (c < channels) q[c * inner] = held[c] * inv;
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        float v = p[c * inner];
        sum += v * v;
      }
      float inv = rsqrtf(sum / static_cast<float>(channels) + eps);
      for (int64_t c = 0; c < channels; ++c) q[c * inner] = p[c * inner] * inv;
    }
  }
}

extern "C" int rms_norm_launcher(const float* x, float* y, int64_t batches, int64_t channels, int64_t inner, float eps,
                                 cudaStream_t stream) {
  int64_t work = batches * inner;
  if (work == 0 || channels == 0) return 0;
  const int threads = 256;
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 132 * 64) blocks = 132 * 64;
  rms_norm_kernel<<<static_cast<int>(blocks), threads, 0, stream>>>(x, y, batches, channels, inner, eps);
  return static_cast<int>(cudaGetLastError());
}

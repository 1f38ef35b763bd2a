// LayerNorm over the trailing dimensions (normalized_shape, here (64, 256, 256): 4 Mi elements per row, only 16 rows),
// as three kernels that the binding launches in turn on one stream:
//   1. layer_norm_partial: the rows are cut into chunks so that the whole GPU works on 16 rows; each block adds its
//      chunk's sum and sum of squares in double (no cancellation to fear at these sizes), a shuffle tree, one
//      partial pair per (row, chunk);
//   2. layer_norm_stats: a warp per row adds its chunks' partials in a fixed order -> mean and 1 / sqrt(var + eps)
//      (biased variance, as PyTorch's);
//   3. layer_norm_apply: y = (x - mean) * rstd * weight + bias, weight and bias indexed by the position in the row
//      (16-byte loads and stores where the row length is a multiple of 4 and all four pointers are 16-byte aligned).
// No atomics anywhere: every call gives the same bits.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kTargetBlocks = 132 * 8;
constexpr int64_t kMaxBlocks = 132 * 32;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kThreads) layer_norm_partial_kernel(const float* __restrict__ x, int64_t rows,
                                                                      int64_t cols, int64_t chunks, int64_t chunk,
                                                                      double2* __restrict__ partial) {
  __shared__ double2 scratch[kWarps];
  for (int64_t task = blockIdx.x; task < rows * chunks; task += gridDim.x) {
    const int64_t row = task / chunks;
    const int64_t begin = (task % chunks) * chunk;
    const int64_t end = begin + chunk < cols ? begin + chunk : cols;
    const float* r = x + row * cols;
    double s = 0.0, q = 0.0;
#pragma unroll 4
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      const double v = r[i];
      s += v;
      q = fma(v, v, q);
    }
    s = warp_sum(s);
    q = warp_sum(q);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = make_double2(s, q);
    __syncthreads();
    if (threadIdx.x < 32) {
      double2 v = threadIdx.x < kWarps ? scratch[threadIdx.x] : make_double2(0.0, 0.0);
      v.x = warp_sum(v.x);
      v.y = warp_sum(v.y);
      if (threadIdx.x == 0) partial[task] = v;
    }
    __syncthreads();
  }
}

__global__ void layer_norm_stats_kernel(const double2* __restrict__ partial, int64_t rows, int64_t cols,
                                        int64_t chunks, double eps, float2* __restrict__ stats) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); row < rows;
       row += warps) {
    double s = 0.0, q = 0.0;
    for (int64_t c = lane; c < chunks; c += 32) {
      s += partial[row * chunks + c].x;
      q += partial[row * chunks + c].y;
    }
    s = warp_sum(s);
    q = warp_sum(q);
    if (lane == 0) {
      const double mean = s / static_cast<double>(cols);
      double var = q / static_cast<double>(cols) - mean * mean;
      var = var > 0.0 ? var : 0.0;
      stats[row] = make_float2(static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + eps)));
    }
  }
}

// The grid's y dimension strides over rows (at most 65535 per step), its x dimension over a row's columns.
__global__ void layer_norm_apply_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ w,
                                             const float4* __restrict__ b, const float2* __restrict__ stats,
                                             float4* __restrict__ y, int64_t rows, int64_t cols4) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float2 st = stats[row];
    const float4* src = x + row * cols4;
    float4* dst = y + row * cols4;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols4;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float4 v = src[j], g = w[j], h = b[j];
      float4 o;
      o.x = fmaf((v.x - st.x) * st.y, g.x, h.x);
      o.y = fmaf((v.y - st.x) * st.y, g.y, h.y);
      o.z = fmaf((v.z - st.x) * st.y, g.z, h.z);
      o.w = fmaf((v.w - st.x) * st.y, g.w, h.w);
      dst[j] = o;
    }
  }
}

__global__ void layer_norm_apply_scalar_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                               const float* __restrict__ b, const float2* __restrict__ stats,
                                               float* __restrict__ y, int64_t rows, int64_t cols) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float2 st = stats[row];
    const float* src = x + row * cols;
    float* dst = y + row * cols;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      dst[j] = fmaf((src[j] - st.x) * st.y, w[j], b[j]);
    }
  }
}

// Rows on y (at most 65535, the rest by the kernels' loop), enough column blocks for about kMaxBlocks in all.
static dim3 apply_grid(int64_t rows, int64_t per_row) {
  const int64_t y = rows < 65535 ? rows : 65535;
  int64_t x = (per_row + kThreads - 1) / kThreads;
  const int64_t cap = kMaxBlocks / y > 1 ? kMaxBlocks / y : 1;
  if (x > cap) x = cap;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

// How many chunks each row is cut into (enough blocks for the whole GPU; at least 4 elements per thread), and the
// chunk length. The binding sizes the partials with it.
extern "C" int64_t layer_norm_chunks(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 1;
  int64_t chunks = (kTargetBlocks + rows - 1) / rows;
  const int64_t most = (cols + 4 * kThreads - 1) / (4 * kThreads);
  if (chunks > most) chunks = most;
  return chunks < 1 ? 1 : chunks;
}

extern "C" int layer_norm_partial_launcher(const float* x, int64_t rows, int64_t cols, int64_t chunks,
                                           double* partial, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  const int64_t chunk = (cols + chunks - 1) / chunks;
  const int64_t work = rows * chunks;
  const int blocks = static_cast<int>(work < kMaxBlocks ? work : kMaxBlocks);
  layer_norm_partial_kernel<<<blocks, kThreads, 0, stream>>>(x, rows, cols, chunks, chunk,
                                                             reinterpret_cast<double2*>(partial));
  return static_cast<int>(cudaGetLastError());
}

extern "C" int layer_norm_stats_launcher(const double* partial, int64_t rows, int64_t cols, int64_t chunks, double eps,
                                         float* stats, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  layer_norm_stats_kernel<<<static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0, stream>>>(
      reinterpret_cast<const double2*>(partial), rows, cols, chunks, eps, reinterpret_cast<float2*>(stats));
  return static_cast<int>(cudaGetLastError());
}

extern "C" int layer_norm_apply_launcher(const float* x, const float* w, const float* b, const float* stats, float* y,
                                         int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  const bool aligned = (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
                        reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  const float2* st = reinterpret_cast<const float2*>(stats);
  if (aligned && cols % 4 == 0) {
    const int64_t cols4 = cols / 4;
    layer_norm_apply_vec4_kernel<<<apply_grid(rows, cols4), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(w), reinterpret_cast<const float4*>(b), st,
        reinterpret_cast<float4*>(y), rows, cols4);
  } else {
    layer_norm_apply_scalar_kernel<<<apply_grid(rows, cols), kThreads, 0, stream>>>(x, w, b, st, y, rows, cols);
  }
  return static_cast<int>(cudaGetLastError());
}

// Cross entropy with mean reduction, F.cross_entropy(logits, targets) for logits (N, C) and class indices (N,).
// Two launches on one stream, no atomics, so every call gives the same bits:
//   1. a warp per row (a grid-stride loop over rows): each lane keeps an online log-sum-exp (running max and the sum of
//      exp(x - max)) over its strided share of the row, read once (16-byte loads where the row length is a multiple of
//      4 and the logits are 16-byte aligned), the lanes merge by shuffles, and lane 0 writes the row's loss
//      logsumexp - x[target] (0 for ignore_index -100, which also does not count; NaN for a target out of range, where
//      PyTorch would raise);
//   2. one block adds the row losses and counts (double, a fixed tree) and divides.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kRowThreads = 256;
constexpr int kRowWarps = kRowThreads / 32;
constexpr int64_t kMaxRowBlocks = 132 * 16;
constexpr int kFinishThreads = 1024;
constexpr int64_t kIgnoreIndex = -100;

struct Lse {
  float m;  // running max (-inf before the first element)
  float s;  // sum of exp(x - m)
};

__device__ __forceinline__ void lse_add(Lse& a, float x) {
  if (x > a.m) {
    a.s = a.s * __expf(a.m - x) + 1.f;  // a.m = -inf: exp(-inf) = 0
    a.m = x;
  } else if (!(x == -INFINITY && a.m == -INFINITY)) {  // -inf adds nothing (and exp(-inf - -inf) would be NaN)
    a.s += __expf(x - a.m);
  }
}

__device__ __forceinline__ Lse lse_merge(Lse a, Lse b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return Lse{m, 0.f};  // both empty
  return Lse{m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

template <bool kVector>
__global__ void __launch_bounds__(kRowThreads) cross_entropy_rows_kernel(const float* __restrict__ logits,
                                                                         const int64_t* __restrict__ targets,
                                                                         float* __restrict__ loss,
                                                                         float* __restrict__ counted, int64_t rows,
                                                                         int64_t classes) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kRowWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); row < rows; row += warps) {
    const float* x = logits + row * classes;
    Lse acc{-INFINITY, 0.f};
    if (kVector) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
      const int64_t n4 = classes / 4;
#pragma unroll 4
      for (int64_t i = lane; i < n4; i += 32) {
        const float4 v = x4[i];
        lse_add(acc, v.x);
        lse_add(acc, v.y);
        lse_add(acc, v.z);
        lse_add(acc, v.w);
      }
    } else {
#pragma unroll 4
      for (int64_t i = lane; i < classes; i += 32) lse_add(acc, x[i]);
    }
    for (int o = 16; o > 0; o >>= 1) {
      Lse other{__shfl_xor_sync(0xffffffffu, acc.m, o), __shfl_xor_sync(0xffffffffu, acc.s, o)};
      acc = lse_merge(acc, other);
    }
    if (lane == 0) {
      const int64_t t = targets[row];
      if (t == kIgnoreIndex) {
        loss[row] = 0.f;
        counted[row] = 0.f;
      } else {
        const float picked = t >= 0 && t < classes ? x[t] : __int_as_float(0x7fc00000);  // NaN
        loss[row] = (acc.m + __logf(acc.s)) - picked;
        counted[row] = 1.f;
      }
    }
  }
}

__global__ void __launch_bounds__(kFinishThreads) cross_entropy_finish_kernel(const float* __restrict__ loss,
                                                                              const float* __restrict__ counted,
                                                                              int64_t rows, float* __restrict__ out) {
  __shared__ double sums[kFinishThreads];
  __shared__ double counts[kFinishThreads];
  double s = 0.0, c = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kFinishThreads) {
    s += loss[i];
    c += counted[i];
  }
  sums[threadIdx.x] = s;
  counts[threadIdx.x] = c;
  __syncthreads();
  for (int half = kFinishThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<float>(sums[0] / counts[0]);  // 0 / 0 = NaN when every row is ignored
}

// logits (rows, classes) and targets (rows) contiguous; `scratch` holds 2 * rows floats; `out` is one float.
extern "C" int cross_entropy_launcher(const float* logits, const int64_t* targets, float* scratch, float* out,
                                      int64_t rows, int64_t classes, cudaStream_t stream) {
  if (rows == 0) {
    cross_entropy_finish_kernel<<<1, kFinishThreads, 0, stream>>>(scratch, scratch, 0, out);  // NaN, as PyTorch
    return static_cast<int>(cudaGetLastError());
  }
  float* loss = scratch;
  float* counted = scratch + rows;
  const int64_t wanted = (rows + kRowWarps - 1) / kRowWarps;
  const int blocks = static_cast<int>(wanted < kMaxRowBlocks ? wanted : kMaxRowBlocks);
  if (classes % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0) {
    cross_entropy_rows_kernel<true><<<blocks, kRowThreads, 0, stream>>>(logits, targets, loss, counted, rows, classes);
  } else {
    cross_entropy_rows_kernel<false><<<blocks, kRowThreads, 0, stream>>>(logits, targets, loss, counted, rows, classes);
  }
  cross_entropy_finish_kernel<<<1, kFinishThreads, 0, stream>>>(loss, counted, rows, out);
  return static_cast<int>(cudaGetLastError());
}

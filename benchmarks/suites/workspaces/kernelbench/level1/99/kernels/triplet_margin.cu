// Triplet margin loss (p = 2, eps = 1e-6, no swap, mean reduction): per row
//   max(margin + ||a - p + eps||_2 - ||a - n + eps||_2, 0)
// (PyTorch's pairwise_distance adds eps to the difference), then the mean over rows.
// The rows are split in two halves computed concurrently: the first on a side stream, the second on the launch stream.
// The side stream first waits for an event recorded on the launch stream (the inputs and the scratch buffer are ready
// there); the launch stream waits for an event recorded on the side stream after its half, before the final mean runs
// on it, so the result and everything the caller does next on the launch stream are ordered after both halves.
// A block per row reads the three rows once (16-byte loads where the row length is a multiple of 4 and the three
// inputs are 16-byte aligned), two shuffle trees give the two squared distances; one block adds the row losses in
// double (a fixed tree, no atomics: the same bits on every call).
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 132 * 32;
constexpr int kFinishThreads = 1024;

// Both block totals, valid in thread 0. The caller syncs before `scratch` is reused.
__device__ __forceinline__ float2 block_sum2(float2 v, float2* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? scratch[lane] : make_float2(0.f, 0.f);
    for (int o = 16; o > 0; o >>= 1) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
  }
  return v;
}

__device__ __forceinline__ void accumulate(float2& acc, float a, float p, float n, float eps) {
  const float dp = (a - p) + eps;
  const float dn = (a - n) + eps;
  acc.x = fmaf(dp, dp, acc.x);
  acc.y = fmaf(dn, dn, acc.y);
}

// Rows [first, last) of the (rows x dim) inputs; loss[r] for each.
template <bool kVector>
__global__ void __launch_bounds__(kThreads) triplet_rows_kernel(const float* __restrict__ anchor,
                                                                const float* __restrict__ positive,
                                                                const float* __restrict__ negative,
                                                                float* __restrict__ loss, int64_t first, int64_t last,
                                                                int64_t dim, float margin, float eps) {
  __shared__ float2 scratch[kWarps];
  for (int64_t row = first + blockIdx.x; row < last; row += gridDim.x) {
    const int64_t offset = row * dim;
    float2 acc = make_float2(0.f, 0.f);
    if (kVector) {
      const float4* a4 = reinterpret_cast<const float4*>(anchor + offset);
      const float4* p4 = reinterpret_cast<const float4*>(positive + offset);
      const float4* n4 = reinterpret_cast<const float4*>(negative + offset);
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < dim / 4; i += kThreads) {
        const float4 a = a4[i], p = p4[i], n = n4[i];
        accumulate(acc, a.x, p.x, n.x, eps);
        accumulate(acc, a.y, p.y, n.y, eps);
        accumulate(acc, a.z, p.z, n.z, eps);
        accumulate(acc, a.w, p.w, n.w, eps);
      }
    } else {
#pragma unroll 4
      for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
        accumulate(acc, anchor[offset + i], positive[offset + i], negative[offset + i], eps);
      }
    }
    const float2 total = block_sum2(acc, scratch);
    if (threadIdx.x == 0) loss[row] = fmaxf(margin + sqrtf(total.x) - sqrtf(total.y), 0.f);
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kFinishThreads) triplet_mean_kernel(const float* __restrict__ loss, int64_t rows,
                                                                      float* __restrict__ out) {
  __shared__ double scratch[kFinishThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kFinishThreads) acc += loss[i];
  scratch[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kFinishThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<float>(scratch[0] / static_cast<double>(rows));  // 0 rows: NaN
}

static void launch_rows(const float* a, const float* p, const float* n, float* loss, int64_t first, int64_t last,
                        int64_t dim, float margin, float eps, bool vector, cudaStream_t stream) {
  if (last <= first) return;
  const int64_t count = last - first;
  const int blocks = static_cast<int>(count < kMaxBlocks ? count : kMaxBlocks);
  if (vector) {
    triplet_rows_kernel<true><<<blocks, kThreads, 0, stream>>>(a, p, n, loss, first, last, dim, margin, eps);
  } else {
    triplet_rows_kernel<false><<<blocks, kThreads, 0, stream>>>(a, p, n, loss, first, last, dim, margin, eps);
  }
}

// anchor, positive, negative (rows x dim), contiguous; `loss` holds rows floats (scratch); `out` one float.
// `side` is a stream other than `launch`; it is joined back to `launch` before this returns.
extern "C" int triplet_margin_launcher(const float* anchor, const float* positive, const float* negative, float* loss,
                                       float* out, int64_t rows, int64_t dim, float margin, float eps,
                                       cudaStream_t launch, cudaStream_t side) {
  const bool vector = dim % 4 == 0 && (reinterpret_cast<uintptr_t>(anchor) | reinterpret_cast<uintptr_t>(positive) |
                                       reinterpret_cast<uintptr_t>(negative)) % 16 == 0;
  const int64_t half = rows / 2;
  cudaEvent_t ready = nullptr, done = nullptr;
  cudaError_t status = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (status == cudaSuccess) status = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (status == cudaSuccess) status = cudaEventRecord(ready, launch);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(side, ready, 0);
  if (status == cudaSuccess) {
    launch_rows(anchor, positive, negative, loss, 0, half, dim, margin, eps, vector, side);
    status = cudaGetLastError();
  }
  if (status == cudaSuccess) status = cudaEventRecord(done, side);
  if (status == cudaSuccess) {
    launch_rows(anchor, positive, negative, loss, half, rows, dim, margin, eps, vector, launch);
    status = cudaGetLastError();
  }
  // The join: the mean (and whatever follows on the launch stream) waits for the side stream's half.
  if (status == cudaSuccess) status = cudaStreamWaitEvent(launch, done, 0);
  if (status == cudaSuccess) {
    triplet_mean_kernel<<<1, kFinishThreads, 0, launch>>>(loss, rows, out);
    status = cudaGetLastError();
  }
  // Destroying a recorded event is fine: its resources are released once the work it marks has completed.
  if (ready != nullptr) cudaEventDestroy(ready);
  if (done != nullptr) cudaEventDestroy(done);
  return static_cast<int>(status);
}

// Linear -> sigmoid -> Linear -> logsumexp over the features, as four launches the binding makes in turn on one
// stream (the GEMMs are cuBLAS SGEMM in pedantic fp32, no TF32, as the task's policy allows for Linear layers):
//   1. linear_gemm: h = x W1^T (cuBLAS);
//   2. bias_sigmoid: h = sigmoid(h + b1) in place (h is this call's own buffer), 16-byte accesses where aligned;
//   3. linear_gemm: z = h W2^T (cuBLAS);
//   4. bias_logsumexp: out[r] = logsumexp_j(z[r, j] + b2[j]), a warp per row: an online log-sum-exp per lane over
//      its strided share of the row (read once), merged across the warp by shuffles. No atomics.
// Under --use_fast_math expf is the hardware approximation (a few ulp), well inside the fp32 error-norm check.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 132 * 32;

// Row-major y (M x N) = x (M x K) W^T with W row-major (N x K): in cuBLAS's column-major terms y^T = W x^T.
extern "C" int linear_gemm_launcher(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                                    cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  if (k == 0) return static_cast<int>(cudaMemsetAsync(y, 0, static_cast<size_t>(m * n) * sizeof(float), stream));
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return 2;
  if (cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) return 3;
  const float one = 1.f, zero = 0.f;
  cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                      static_cast<int>(k), &one, w, static_cast<int>(k), x, static_cast<int>(k), &zero,
                                      y, static_cast<int>(n));
  return status == CUBLAS_STATUS_SUCCESS ? 0 : 4;
}

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + __expf(-v)); }

__global__ void bias_sigmoid_vec4_kernel(float4* __restrict__ h, const float4* __restrict__ bias, int64_t rows,
                                         int64_t cols4) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    float4* r = h + row * cols4;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols4;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float4 v = r[j];
      const float4 b = bias[j];
      v.x = sigmoid(v.x + b.x);
      v.y = sigmoid(v.y + b.y);
      v.z = sigmoid(v.z + b.z);
      v.w = sigmoid(v.w + b.w);
      r[j] = v;
    }
  }
}

__global__ void bias_sigmoid_scalar_kernel(float* __restrict__ h, const float* __restrict__ bias, int64_t rows,
                                           int64_t cols) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    float* r = h + row * cols;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      r[j] = sigmoid(r[j] + bias[j]);
    }
  }
}

// Rows on y (at most 65535, the rest by the kernels' loop), enough column blocks for about kMaxBlocks in all.
static dim3 row_grid(int64_t rows, int64_t per_row) {
  const int64_t y = rows < 65535 ? rows : 65535;
  int64_t x = (per_row + kThreads - 1) / kThreads;
  const int64_t cap = kMaxBlocks / y > 1 ? kMaxBlocks / y : 1;
  if (x > cap) x = cap;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

extern "C" int bias_sigmoid_launcher(float* h, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  if (cols % 4 == 0 && (reinterpret_cast<uintptr_t>(h) | reinterpret_cast<uintptr_t>(bias)) % 16 == 0) {
    bias_sigmoid_vec4_kernel<<<row_grid(rows, cols / 4), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(h), reinterpret_cast<const float4*>(bias), rows, cols / 4);
  } else {
    bias_sigmoid_scalar_kernel<<<row_grid(rows, cols), kThreads, 0, stream>>>(h, bias, rows, cols);
  }
  return static_cast<int>(cudaGetLastError());
}

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
  if (m == -INFINITY) return Lse{m, 0.f};
  return Lse{m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__global__ void __launch_bounds__(kThreads) bias_logsumexp_kernel(const float* __restrict__ z,
                                                                  const float* __restrict__ bias,
                                                                  float* __restrict__ out, int64_t rows,
                                                                  int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); row < rows; row += warps) {
    const float* r = z + row * cols;
    Lse acc{-INFINITY, 0.f};
#pragma unroll 4
    for (int64_t j = lane; j < cols; j += 32) lse_add(acc, r[j] + __ldg(bias + j));
    for (int o = 16; o > 0; o >>= 1) {
      Lse other{__shfl_xor_sync(0xffffffffu, acc.m, o), __shfl_xor_sync(0xffffffffu, acc.s, o)};
      acc = lse_merge(acc, other);
    }
    // As torch.logsumexp: an infinite maximum is not subtracted (inf stays inf; all -inf gives -inf).
    if (lane == 0) out[row] = acc.m == INFINITY || acc.m == -INFINITY ? acc.m : acc.m + __logf(acc.s);
  }
}

extern "C" int bias_logsumexp_launcher(const float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                                       cudaStream_t stream) {
  if (rows == 0) return 0;
  const int64_t wanted = (rows + kWarps - 1) / kWarps;
  const int blocks = static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  bias_logsumexp_kernel<<<blocks, kThreads, 0, stream>>>(z, bias, out, rows, cols);
  return static_cast<int>(cudaGetLastError());
}

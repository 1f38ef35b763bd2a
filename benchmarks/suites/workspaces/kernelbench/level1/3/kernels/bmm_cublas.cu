// Batched matrix product C[b] = A[b] B[b] through one strided-batched cuBLAS SGEMM in pedantic fp32 (no TF32, as the
// reference), which the task's policy allows for a matrix product. Row-major C (M x N) is the column-major C^T = B^T A^T,
// so the operands are passed swapped; each matrix of the batch is at a fixed stride from the previous one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

// A (batch, M, K), B (batch, K, N), C (batch, M, N): contiguous, row-major.
extern "C" int bmm_cublas_launcher(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                                   int64_t k, cudaStream_t stream) {
  if (batch == 0 || m == 0 || n == 0) return 0;
  if (k == 0) {
    return static_cast<int>(cudaMemsetAsync(c, 0, static_cast<size_t>(batch * m * n) * sizeof(float), stream));
  }
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return 2;
  if (cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) return 3;
  const float one = 1.f, zero = 0.f;
  cublasStatus_t status = cublasSgemmStridedBatched(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one, b,
      static_cast<int>(n), static_cast<long long>(k * n), a, static_cast<int>(k), static_cast<long long>(m * k), &zero,
      c, static_cast<int>(n), static_cast<long long>(m * n), static_cast<int>(batch));
  return status == CUBLAS_STATUS_SUCCESS ? 0 : 4;
}

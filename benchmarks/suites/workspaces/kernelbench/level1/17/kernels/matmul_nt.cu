// C = A B^T through cuBLAS SGEMM in pedantic fp32 (no TF32, as the reference), which the task's policy allows for a
// matrix product. Row-major C (M x N) = op(A) op(B) is, in cuBLAS's column-major terms, C^T = op(B)^T op(A)^T:
// the operands are passed swapped, and a stored transpose becomes a transpose flag (no copy of either operand).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

// A is stored (M x K), or (K x M) when trans_a; B is stored (K x N), or (N x K) when trans_b; all row-major,
// contiguous. C is (M x N), row-major.
extern "C" int matmul_nt_launcher(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                               bool trans_b, cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  if (k == 0) return static_cast<int>(cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * sizeof(float), stream));
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return 2;
  if (cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) return 3;
  const float one = 1.f, zero = 0.f;
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  cublasStatus_t status = cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one, b, ldb, a,
                                      lda, &zero, c, static_cast<int>(n));
  return status == CUBLAS_STATUS_SUCCESS ? 0 : 4;
}

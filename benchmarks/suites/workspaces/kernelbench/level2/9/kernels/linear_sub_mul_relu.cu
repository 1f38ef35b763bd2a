// Linear, subtract, multiply, ReLU: y = epilogue(x W^T + b). The GEMM is cuBLAS SGEMM in pedantic fp32 (no TF32, as the reference),
// which the task's policy allows for a Linear layer; the bias and the elementwise tail are one fused
// pass over the GEMM's output instead of the reference's 3 separate ones.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float epilogue(float v, float a, float b) { return fmaxf((v - a) * b, 0.f); }

__global__ void linear_sub_mul_relu_epilogue_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t rows,
                                       int64_t cols, float a, float b) {
  int64_t n = rows * cols;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    y[i] = epilogue(y[i] + bias[i % cols], a, b);
  }
}

// Row-major y (M x N) = x (M x K) W^T, W row-major (N x K): in cuBLAS's column-major terms y^T = W x^T.
extern "C" int linear_sub_mul_relu_launcher(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
                               int64_t k, float a, float b, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return 2;
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  const float one = 1.f, zero = 0.f;
  cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                      static_cast<int>(k), &one, w, static_cast<int>(k), x, static_cast<int>(k), &zero,
                                      y, static_cast<int>(n));
  if (status != CUBLAS_STATUS_SUCCESS) return 3;
  int64_t total = m * n;
  if (total == 0) return 0;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 132 * 32) blocks = 132 * 32;
  linear_sub_mul_relu_epilogue_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(y, bias, m, n, a, b);
  return static_cast<int>(cudaGetLastError());
}

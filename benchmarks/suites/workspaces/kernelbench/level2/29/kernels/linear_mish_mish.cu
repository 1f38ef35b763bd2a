// Linear, Mish, Mish: y = epilogue(x W^T + b). The GEMM is cuBLAS SGEMM in pedantic fp32 (no TF32, as the reference),
// which the task's policy allows for a Linear layer; the bias and the elementwise tail are one fused
// pass over the GEMM's output instead of the reference's 2 separate ones.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

// tanh through expm1: under --use_fast_math (always on) tanhf becomes tanh.approx.f32, whose ~2^-11
// relative error would fail an fp32 task's error-norm check; expm1f stays within a few ulp.
__device__ __forceinline__ float precise_tanh(float v) {
  float a = fabsf(v);
  if (a > 9.f) return copysignf(1.f, v);  // tanh(9) rounds to 1 in fp32
  float e = expm1f(2.f * a);
  return copysignf(e / (e + 2.f), v);
}

__device__ __forceinline__ float epilogue(float v, float a, float b) { float z = v * precise_tanh((v > 20.f ? v : log1pf(expf(v))));
  return z * precise_tanh((z > 20.f ? z : log1pf(expf(z)))); }

__global__ void linear_mish_mish_epilogue_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t rows,
                                       int64_t cols, float a, float b) {
  int64_t n = rows * cols;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    y[i] = epilogue(y[i] + bias[i % cols], a, b);
  }
}

// Row-major y (M x N) = x (M x K) W^T, W row-major (N x K): in cuBLAS's column-major terms y^T = W x^T.
extern "C" int linear_mish_mish_launcher(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
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
  linear_mish_mish_epilogue_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(y, bias, m, n, a, b);
  return static_cast<int>(cudaGetLastError());
}

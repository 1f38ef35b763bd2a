// diag(A) B: row i of B scaled by A[i], one multiply per element as the reference does it (A.unsqueeze(1) * B), so
// the result is bitwise the reference's. The grid's y dimension strides over rows (at most 65535 rows per step), its
// x dimension over a row's columns; each thread reads its row's scale once. 16-byte loads and stores where the row
// length is a multiple of 4 and B and C are 16-byte aligned (then every row is); a scalar path otherwise.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;
constexpr int64_t kMaxRowBlocks = 65535;
constexpr int64_t kMaxColumnBlocks = 64;

__global__ void diag_matmul_vec4_kernel(const float* __restrict__ d, const float4* __restrict__ b,
                                        float4* __restrict__ c, int64_t rows, int64_t cols4) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float s = __ldg(d + row);
    const float4* src = b + row * cols4;
    float4* dst = c + row * cols4;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols4;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float4 v = src[j];
      v.x *= s;
      v.y *= s;
      v.z *= s;
      v.w *= s;
      dst[j] = v;
    }
  }
}

__global__ void diag_matmul_scalar_kernel(const float* __restrict__ d, const float* __restrict__ b,
                                          float* __restrict__ c, int64_t rows, int64_t cols) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float s = __ldg(d + row);
    const float* src = b + row * cols;
    float* dst = c + row * cols;
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      dst[j] = src[j] * s;
    }
  }
}

// d (rows), b and c (rows x cols), contiguous.
extern "C" int diag_matmul_launcher(const float* d, const float* b, float* c, int64_t rows, int64_t cols,
                                    cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  const bool vector = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c)) % 16 == 0;
  const int64_t per_row = vector ? cols / 4 : cols;
  int64_t x_blocks = (per_row + kThreads - 1) / kThreads;
  if (x_blocks > kMaxColumnBlocks) x_blocks = kMaxColumnBlocks;
  const dim3 grid(static_cast<unsigned>(x_blocks), static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks));
  if (vector) {
    diag_matmul_vec4_kernel<<<grid, kThreads, 0, stream>>>(d, reinterpret_cast<const float4*>(b),
                                                           reinterpret_cast<float4*>(c), rows, per_row);
  } else {
    diag_matmul_scalar_kernel<<<grid, kThreads, 0, stream>>>(d, b, c, rows, per_row);
  }
  return static_cast<int>(cudaGetLastError());
}

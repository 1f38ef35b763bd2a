"""KernelBench level 1, problem 7: (M, 64) @ (64, N), a tiled kernel for small K (its cost is writing C)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

small_k_matmul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
// C = A B for a small inner dimension K: each block stages a 64-row strip of A and a 64-column strip of
// B in shared memory, 64 values of K at a time, and each of its 256 threads accumulates a 4 x 4 tile of C.
// The cost is writing C, with consecutive threads writing consecutive columns.
constexpr int kTile = 64;
constexpr int kChunk = 64;

__global__ void small_k_matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                      int64_t m, int64_t n, int64_t k) {
    __shared__ float as[kChunk][kTile + 1];
    __shared__ float bs[kChunk][kTile];
    int64_t row0 = blockIdx.y * (int64_t)kTile, col0 = blockIdx.x * (int64_t)kTile;
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
        int width = (int)(k - k0 < kChunk ? k - k0 : kChunk);
        for (int idx = threadIdx.x; idx < kTile * width; idx += blockDim.x) {
            int r = idx / width, kk = idx % width;
            as[kk][r] = row0 + r < m ? a[(row0 + r) * k + k0 + kk] : 0.f;
        }
        for (int idx = threadIdx.x; idx < kTile * width; idx += blockDim.x) {
            int kk = idx / kTile, cc = idx % kTile;
            bs[kk][cc] = col0 + cc < n ? b[(k0 + kk) * n + col0 + cc] : 0.f;
        }
        __syncthreads();
        for (int kk = 0; kk < width; ++kk) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = as[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int64_t r = row0 + ty * 4 + i;
        if (r >= m) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int64_t col = col0 + tx + 16 * j;
            if (col < n) c[r * n + col] = acc[i][j];
        }
    }
}

torch::Tensor small_k_matmul(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "small_k_matmul: CUDA tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "small_k_matmul: A (M, K), B (K, N)");
    auto a = A.contiguous();
    auto b = B.contiguous();
    int64_t m = a.size(0), n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    if (m == 0 || n == 0) return c;
    if (a.size(1) == 0) return c.zero_();
    dim3 grid((unsigned)((n + kTile - 1) / kTile), (unsigned)((m + kTile - 1) / kTile));
    small_k_matmul_kernel<<<grid, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), m, n, a.size(1));
    return c;
}
"""

small_k_matmul_cpp_source = """
torch::Tensor small_k_matmul(torch::Tensor A, torch::Tensor B);
"""

small_k_matmul = load_inline(
    name="small_k_matmul",
    cpp_sources=small_k_matmul_cpp_source,
    cuda_sources=small_k_matmul_source,
    functions=["small_k_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.small_k_matmul = small_k_matmul

    def forward(self, A, B):
        return self.small_k_matmul.small_k_matmul(A, B)

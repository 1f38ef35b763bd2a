"""KernelBench level 1, problem 10: (N, M, K) @ (K, L) as one (N*M, K) x (K, L) GEMM: 64 x 64 tiles, 16 deep, 4 x 4 per thread."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tensor_matmul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
constexpr int BM = 64, BN = 64, BK = 16;

__global__ void sgemm_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                   int64_t m, int64_t n, int64_t k) {
    __shared__ float as[BK][BM + 4];
    __shared__ float bs[BK][BN];
    int64_t row0 = blockIdx.y * (int64_t)BM, col0 = blockIdx.x * (int64_t)BN;
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < k; k0 += BK) {
        // 64 x 16 of A and 16 x 64 of B: 1024 values each, 4 per thread, zero outside the matrices.
        for (int idx = threadIdx.x; idx < BM * BK; idx += blockDim.x) {
            int r = idx / BK, kk = idx % BK;
            int64_t gr = row0 + r, gk = k0 + kk;
            as[kk][r] = (gr < m && gk < k) ? a[gr * k + gk] : 0.f;
        }
        for (int idx = threadIdx.x; idx < BK * BN; idx += blockDim.x) {
            int kk = idx / BN, cc = idx % BN;
            int64_t gk = k0 + kk, gc = col0 + cc;
            bs[kk][cc] = (gk < k && gc < n) ? b[gk * n + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
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

torch::Tensor tensor_matmul(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.dim() >= 2 && B.dim() == 2, "tensor_matmul: A (..., K), B (K, L)");
    TORCH_CHECK(A.size(-1) == B.size(0), "tensor_matmul: inner dimensions differ");
    auto a = A.contiguous();
    auto b = B.contiguous();
    int64_t k = a.size(-1), n = b.size(1), m = a.numel() / (k == 0 ? 1 : k);
    std::vector<int64_t> shape = a.sizes().vec();
    shape.back() = n;
    auto c = torch::empty(shape, a.options());
    if (m == 0 || n == 0) return c;
    dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
    sgemm_tiled_kernel<<<grid, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), m, n, k);
    return c;
}
"""

tensor_matmul_cpp_source = """
torch::Tensor tensor_matmul(torch::Tensor A, torch::Tensor B);
"""

tensor_matmul = load_inline(
    name="tensor_matmul",
    cpp_sources=tensor_matmul_cpp_source,
    cuda_sources=tensor_matmul_source,
    functions=["tensor_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return tensor_matmul.tensor_matmul(A, B)

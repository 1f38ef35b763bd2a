"""KernelBench level 1, problem 12: diag(A) @ B as a row scaling (A[i] * B[i, j]); one pass over B."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_matmul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void diag_matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                   int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = a[i / cols] * b[i];
    }
}

torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "diag_matmul: CUDA tensors");
    TORCH_CHECK(A.dim() == 1 && B.dim() == 2 && A.size(0) == B.size(0), "diag_matmul: A (N), B (N, M)");
    auto a = A.contiguous();
    auto b = B.contiguous();
    auto out = torch::empty_like(b);
    int64_t n = b.numel();
    if (n == 0) return out;
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 132 * 32) blocks = 132 * 32;
    diag_matmul_kernel<<<(int)blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
                                                 b.size(0), b.size(1));
    return out;
}
"""

diag_matmul_cpp_source = """
torch::Tensor diag_matmul(torch::Tensor A, torch::Tensor B);
"""

diag_matmul = load_inline(
    name="diag_matmul",
    cpp_sources=diag_matmul_cpp_source,
    cuda_sources=diag_matmul_source,
    functions=["diag_matmul"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.diag_matmul = diag_matmul

    def forward(self, A, B):
        return self.diag_matmul.diag_matmul(A, B)

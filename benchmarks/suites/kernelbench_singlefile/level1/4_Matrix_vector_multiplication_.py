"""KernelBench level 1, problem 4: A (M, K) @ B (K, 1), one block per row of A, a block reduction."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemv_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void gemv_kernel(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
                            int64_t k) {
    __shared__ float partial[32];
    const float* row = a + blockIdx.x * k;
    float acc = 0.f;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) acc = fmaf(row[j], x[j], acc);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) y[blockIdx.x] = v;
    }
}

torch::Tensor gemv(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "gemv: CUDA tensors");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && B.size(1) == 1 && A.size(1) == B.size(0), "gemv: A (M, K), B (K, 1)");
    auto a = A.contiguous();
    auto x = B.contiguous();
    auto y = torch::empty({a.size(0), 1}, a.options());
    if (a.size(0) == 0) return y;
    gemv_kernel<<<(unsigned)a.size(0), 1024>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), a.size(1));
    return y;
}
"""

gemv_cpp_source = """
torch::Tensor gemv(torch::Tensor A, torch::Tensor B);
"""

gemv = load_inline(
    name="gemv",
    cpp_sources=gemv_cpp_source,
    cuda_sources=gemv_source,
    functions=["gemv"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gemv = gemv

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return self.gemv.gemv(A, B)

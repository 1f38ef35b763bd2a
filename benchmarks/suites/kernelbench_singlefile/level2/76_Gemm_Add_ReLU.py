"""KernelBench level 2, problem 76: GEMM (PyTorch, cuBLAS) then one fused bias-add + ReLU kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bias_relu_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void bias_relu_kernel(const float* __restrict__ z, const float* __restrict__ bias, float* __restrict__ y,
                              int64_t n, int64_t cols, float a) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = z[i] + bias[i % cols];
        y[i] = fmaxf(v, 0.f);
    }
}

torch::Tensor bias_relu(torch::Tensor z, torch::Tensor bias, double a) {
    TORCH_CHECK(z.is_cuda() && z.dim() == 2 && bias.dim() == 1 && bias.size(0) == z.size(1), "bias_relu: z (M, N), bias (N)");
    auto input = z.contiguous();
    auto b = bias.contiguous();
    auto y = torch::empty_like(input);
    int64_t n = input.numel();
    if (n == 0) return y;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    bias_relu_kernel<<<(int)blocks, 256>>>(input.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n,
                                        input.size(1), (float)a);
    return y;
}
"""

bias_relu_cpp_source = """
torch::Tensor bias_relu(torch::Tensor z, torch::Tensor bias, double a);
"""

bias_relu = load_inline(
    name="bias_relu",
    cpp_sources=bias_relu_cpp_source,
    cuda_sources=bias_relu_source,
    functions=["bias_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        z = torch.matmul(x, self.gemm.weight.t())
        return bias_relu.bias_relu(z, self.bias, 0.0)

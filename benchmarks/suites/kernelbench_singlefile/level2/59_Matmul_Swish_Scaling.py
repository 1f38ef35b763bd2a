"""KernelBench level 2, problem 59: GEMM (PyTorch, cuBLAS) then one fused bias + Swish + scaling kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bias_swish_scale_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void bias_swish_scale_kernel(const float* __restrict__ z, const float* __restrict__ bias, float* __restrict__ y,
                              int64_t n, int64_t cols, float a) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = z[i] + bias[i % cols];
        y[i] = v / (1.f + expf(-v)) * a;
    }
}

torch::Tensor bias_swish_scale(torch::Tensor z, torch::Tensor bias, double a) {
    TORCH_CHECK(z.is_cuda() && z.dim() == 2 && bias.dim() == 1 && bias.size(0) == z.size(1), "bias_swish_scale: z (M, N), bias (N)");
    auto input = z.contiguous();
    auto b = bias.contiguous();
    auto y = torch::empty_like(input);
    int64_t n = input.numel();
    if (n == 0) return y;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    bias_swish_scale_kernel<<<(int)blocks, 256>>>(input.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n,
                                        input.size(1), (float)a);
    return y;
}
"""

bias_swish_scale_cpp_source = """
torch::Tensor bias_swish_scale(torch::Tensor z, torch::Tensor bias, double a);
"""

bias_swish_scale = load_inline(
    name="bias_swish_scale",
    cpp_sources=bias_swish_scale_cpp_source,
    cuda_sources=bias_swish_scale_source,
    functions=["bias_swish_scale"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        z = torch.matmul(x, self.matmul.weight.t())
        return bias_swish_scale.bias_swish_scale(z, self.matmul.bias, self.scaling_factor)

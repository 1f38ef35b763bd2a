"""KernelBench level 1, problem 41: MaxPool1d (kernel 8, stride 1, padding 4, dilation 3), one thread per output."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

max_pool1d_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void max_pool1d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int64_t length,
                                  int64_t out_length, int kernel, int stride, int padding, int dilation) {
    int64_t n = planes * out_length;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t plane = i / out_length, o = i % out_length;
        const float* p = x + plane * length;
        float best = -FLT_MAX;
        int64_t start = o * stride - padding;
        for (int t = 0; t < kernel; ++t) {
            int64_t pos = start + (int64_t)t * dilation;
            if (pos >= 0 && pos < length) best = fmaxf(best, p[pos]);
        }
        y[i] = best;
    }
}

torch::Tensor max_pool1d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "max_pool1d: (N, C, L) CUDA tensor");
    auto input = x.contiguous();
    int64_t length = input.size(2);
    int64_t out_length = (length + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
    TORCH_CHECK(out_length > 0, "max_pool1d: output would be empty");
    auto y = torch::empty({input.size(0), input.size(1), out_length}, input.options());
    int64_t n = y.numel();
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    max_pool1d_kernel<<<(int)blocks, 256>>>(input.data_ptr<float>(), y.data_ptr<float>(), input.size(0) * input.size(1),
                                            length, out_length, (int)kernel, (int)stride, (int)padding, (int)dilation);
    return y;
}
"""

max_pool1d_cpp_source = """
torch::Tensor max_pool1d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation);
"""

max_pool1d = load_inline(
    name="max_pool1d",
    cpp_sources=max_pool1d_cpp_source,
    cuda_sources=max_pool1d_source,
    functions=["max_pool1d"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        kernel_size: int,
        stride: int | None = None,
        padding: int = 0,
        dilation: int = 1,
        return_indices: bool = False,
    ):
        super().__init__()
        assert not return_indices, "indices are not returned"
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool1d.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation)

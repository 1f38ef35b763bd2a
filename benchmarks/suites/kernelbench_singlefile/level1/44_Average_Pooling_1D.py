"""KernelBench level 1, problem 44: AvgPool1d (kernel 8, stride 1, padding 4; padding counts), one thread per output."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

avg_pool1d_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void avg_pool1d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int64_t length,
                                  int64_t out_length, int kernel, int stride, int padding) {
    int64_t n = planes * out_length;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    float scale = 1.f / (float)kernel;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t plane = i / out_length, o = i % out_length;
        const float* p = x + plane * length;
        int64_t start = o * stride - padding;
        float sum = 0.f;
        for (int t = 0; t < kernel; ++t) {
            int64_t pos = start + t;
            if (pos >= 0 && pos < length) sum += p[pos];
        }
        y[i] = sum * scale;
    }
}

torch::Tensor avg_pool1d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "avg_pool1d: (N, C, L) CUDA tensor");
    auto input = x.contiguous();
    int64_t length = input.size(2);
    int64_t out_length = (length + 2 * padding - kernel) / stride + 1;
    TORCH_CHECK(out_length > 0, "avg_pool1d: output would be empty");
    auto y = torch::empty({input.size(0), input.size(1), out_length}, input.options());
    int64_t n = y.numel();
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    avg_pool1d_kernel<<<(int)blocks, 256>>>(input.data_ptr<float>(), y.data_ptr<float>(), input.size(0) * input.size(1),
                                            length, out_length, (int)kernel, (int)stride, (int)padding);
    return y;
}
"""

avg_pool1d_cpp_source = """
torch::Tensor avg_pool1d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding);
"""

avg_pool1d = load_inline(
    name="avg_pool1d",
    cpp_sources=avg_pool1d_cpp_source,
    cuda_sources=avg_pool1d_source,
    functions=["avg_pool1d"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool1d.avg_pool1d(x, self.kernel_size, self.stride, self.padding)

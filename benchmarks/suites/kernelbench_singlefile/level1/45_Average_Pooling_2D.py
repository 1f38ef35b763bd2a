"""KernelBench level 1, problem 45: AvgPool2d (kernel 11, stride 11, no padding), one thread per output."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

avg_pool2d_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void avg_pool2d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int64_t h,
                                  int64_t w, int64_t oh, int64_t ow, int kernel, int stride, int padding) {
    int64_t n = planes * oh * ow;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    float scale = 1.f / (float)(kernel * kernel);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t ox = i % ow, oy = (i / ow) % oh, plane = i / (ow * oh);
        const float* p = x + plane * h * w;
        float sum = 0.f;
        for (int ky = 0; ky < kernel; ++ky) {
            int64_t iy = oy * stride - padding + ky;
            if (iy < 0 || iy >= h) continue;
            for (int kx = 0; kx < kernel; ++kx) {
                int64_t ix = ox * stride - padding + kx;
                if (ix >= 0 && ix < w) sum += p[iy * w + ix];
            }
        }
        y[i] = sum * scale;
    }
}

torch::Tensor avg_pool2d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4, "avg_pool2d: (N, C, H, W) CUDA tensor");
    auto input = x.contiguous();
    int64_t h = input.size(2), w = input.size(3);
    int64_t oh = (h + 2 * padding - kernel) / stride + 1;
    int64_t ow = (w + 2 * padding - kernel) / stride + 1;
    TORCH_CHECK(oh > 0 && ow > 0, "avg_pool2d: output would be empty");
    auto y = torch::empty({input.size(0), input.size(1), oh, ow}, input.options());
    int64_t n = y.numel();
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    avg_pool2d_kernel<<<(int)blocks, 256>>>(input.data_ptr<float>(), y.data_ptr<float>(), input.size(0) * input.size(1),
                                            h, w, oh, ow, (int)kernel, (int)stride, (int)padding);
    return y;
}
"""

avg_pool2d_cpp_source = """
torch::Tensor avg_pool2d(torch::Tensor x, int64_t kernel, int64_t stride, int64_t padding);
"""

avg_pool2d = load_inline(
    name="avg_pool2d",
    cpp_sources=avg_pool2d_cpp_source,
    cuda_sources=avg_pool2d_source,
    functions=["avg_pool2d"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool2d.avg_pool2d(x, self.kernel_size, self.stride, self.padding)

"""KernelBench level 1, problem 98: kl_div(log p, t, 'batchmean') = sum(t * (log t - log p)) / N, one grid-wide sum."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kl_div_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
// Sum of one float per thread over the block, in double; the result is valid in thread 0.
__device__ double block_sum_double(double v) {
    __shared__ double scratch[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w) total += scratch[w];
    }
    return total;
}

// Adds the per-row (or per-block) values and divides: one block, result into out[0].
__global__ void mean_of_kernel(const double* __restrict__ values, int64_t count, double divisor, float* __restrict__ out) {
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += values[i];
    double total = block_sum_double(acc);
    if (threadIdx.x == 0) *out = (float)(total / divisor);
}

__global__ void kl_partial_kernel(const float* __restrict__ p, const float* __restrict__ t, int64_t n,
                                  double* __restrict__ partial) {
    float acc = 0.f;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float target = t[i];
        // kl_div's pointwise term: target * (log(target) - input), 0 where target is 0.
        if (target > 0.f) acc += target * (logf(target) - logf(p[i]));
    }
    double total = block_sum_double(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

torch::Tensor kl_div_batchmean(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.is_cuda() && targets.is_cuda() && predictions.sizes() == targets.sizes(), "kl_div: same shapes");
    TORCH_CHECK(predictions.dim() >= 1, "kl_div: a batch dimension");
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    const int blocks = 132 * 8;
    auto partial = torch::empty({blocks}, p.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, p.options());
    kl_partial_kernel<<<blocks, 512>>>(p.data_ptr<float>(), t.data_ptr<float>(), p.numel(), partial.data_ptr<double>());
    mean_of_kernel<<<1, 1024>>>(partial.data_ptr<double>(), blocks, (double)p.size(0), out.data_ptr<float>());
    return out;
}
"""

kl_div_cpp_source = """
torch::Tensor kl_div_batchmean(torch::Tensor predictions, torch::Tensor targets);
"""

kl_div = load_inline(
    name="kl_div",
    cpp_sources=kl_div_cpp_source,
    cuda_sources=kl_div_source,
    functions=["kl_div_batchmean"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return kl_div.kl_div_batchmean(predictions, targets)

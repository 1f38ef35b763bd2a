"""KernelBench level 1, problem 95: cross entropy, mean over rows: per row logsumexp(x) - x[target], one block each."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cross_entropy_source = r"""
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

#include <cfloat>

__global__ void cross_entropy_rows_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                          int64_t classes, double* __restrict__ losses) {
    __shared__ float shared_max[32];
    __shared__ float row_max;
    const float* row = logits + blockIdx.x * classes;
    float m = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) m = fmaxf(m, row[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) shared_max[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float best = -FLT_MAX;
        for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w) best = fmaxf(best, shared_max[w]);
        row_max = best;
    }
    __syncthreads();
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) s += __expf(row[j] - row_max);
    double total = block_sum_double(s);
    if (threadIdx.x == 0) {
        int64_t t = targets[blockIdx.x];
        losses[blockIdx.x] = (double)row_max + log(total) - (double)row[t];
    }
}

torch::Tensor cross_entropy_mean(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.is_cuda() && logits.dim() == 2 && logits.scalar_type() == torch::kFloat32, "cross_entropy: logits (N, C)");
    TORCH_CHECK(targets.is_cuda() && targets.dim() == 1 && targets.size(0) == logits.size(0) &&
                targets.scalar_type() == torch::kInt64, "cross_entropy: int64 targets (N)");
    auto x = logits.contiguous();
    auto t = targets.contiguous();
    int64_t rows = x.size(0);
    auto losses = torch::empty({rows}, x.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, x.options());
    cross_entropy_rows_kernel<<<(unsigned)rows, 512>>>(x.data_ptr<float>(), t.data_ptr<int64_t>(), x.size(1),
                                                       losses.data_ptr<double>());
    mean_of_kernel<<<1, 1024>>>(losses.data_ptr<double>(), rows, (double)rows, out.data_ptr<float>());
    return out;
}
"""

cross_entropy_cpp_source = """
torch::Tensor cross_entropy_mean(torch::Tensor logits, torch::Tensor targets);
"""

cross_entropy = load_inline(
    name="cross_entropy",
    cpp_sources=cross_entropy_cpp_source,
    cuda_sources=cross_entropy_source,
    functions=["cross_entropy_mean"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return cross_entropy.cross_entropy_mean(predictions, targets)

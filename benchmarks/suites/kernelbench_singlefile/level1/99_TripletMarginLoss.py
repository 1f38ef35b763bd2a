"""KernelBench level 1, problem 99: TripletMarginLoss (p=2, eps=1e-6, mean): one block per row for both distances."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

triplet_source = r"""
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

__global__ void triplet_rows_kernel(const float* __restrict__ a, const float* __restrict__ p, const float* __restrict__ n,
                                    int64_t dim, float margin, double* __restrict__ losses) {
    __shared__ double first;
    const int64_t base = blockIdx.x * dim;
    float dp = 0.f, dn = 0.f;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
        float x = a[base + j];
        // pairwise_distance adds eps to the difference before the norm.
        float u = x - p[base + j] + 1e-6f;
        float v = x - n[base + j] + 1e-6f;
        dp = fmaf(u, u, dp);
        dn = fmaf(v, v, dn);
    }
    double sp = block_sum_double(dp);
    if (threadIdx.x == 0) first = sp;
    __syncthreads();
    double sn = block_sum_double(dn);
    if (threadIdx.x == 0) {
        double loss = sqrt(first) - sqrt(sn) + (double)margin;
        losses[blockIdx.x] = loss > 0.0 ? loss : 0.0;
    }
}

torch::Tensor triplet_margin_loss(torch::Tensor anchor, torch::Tensor positive, torch::Tensor negative, double margin) {
    TORCH_CHECK(anchor.is_cuda() && anchor.dim() == 2, "triplet: (N, D) CUDA tensors");
    TORCH_CHECK(anchor.sizes() == positive.sizes() && anchor.sizes() == negative.sizes(), "triplet: same shapes");
    auto a = anchor.contiguous();
    auto p = positive.contiguous();
    auto n = negative.contiguous();
    int64_t rows = a.size(0);
    auto losses = torch::empty({rows}, a.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, a.options());
    triplet_rows_kernel<<<(unsigned)rows, 512>>>(a.data_ptr<float>(), p.data_ptr<float>(), n.data_ptr<float>(), a.size(1),
                                                 (float)margin, losses.data_ptr<double>());
    mean_of_kernel<<<1, 1024>>>(losses.data_ptr<double>(), rows, (double)rows, out.data_ptr<float>());
    return out;
}
"""

triplet_cpp_source = """
torch::Tensor triplet_margin_loss(torch::Tensor anchor, torch::Tensor positive, torch::Tensor negative, double margin);
"""

triplet = load_inline(
    name="triplet",
    cpp_sources=triplet_cpp_source,
    cuda_sources=triplet_source,
    functions=["triplet_margin_loss"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, margin=1.0):
        super().__init__()
        self.margin = margin

    def forward(self, anchor, positive, negative):
        return triplet.triplet_margin_loss(anchor, positive, negative, self.margin)

"""KernelBench level 1, problem 93: cumsum(x * mask) along dim 1; the mask is read as bytes inside the scan."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

masked_cumsum_rows_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
// Inclusive scans along each row: one block per row walks the row in tiles of 4 values per thread, scans
// each tile in the block (a thread's values, warp shuffles, the warps' totals) and combines it with the
// running total of the tiles before it.
constexpr int kThreads = 512;
constexpr int kPerThread = 4;
constexpr int kTile = kThreads * kPerThread;

struct Add {
    __device__ static float identity() { return 0.f; }
    __device__ static float op(float a, float b) { return a + b; }
};
struct Mul {
    __device__ static float identity() { return 1.f; }
    __device__ static float op(float a, float b) { return a * b; }
};

// value(j) is the scan's j-th input (0 <= j < cols); out(j, v) stores the j-th inclusive result.
template <typename Op, typename Value, typename Store>
__device__ void scan_row(int64_t cols, Value value, Store store) {
    __shared__ float warp_totals[kThreads / 32];
    __shared__ float carry;
    if (threadIdx.x == 0) carry = Op::identity();
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t tile = 0; tile < cols; tile += kTile) {
        float v[kPerThread];
        float local = Op::identity();
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            int64_t j = tile + threadIdx.x * kPerThread + k;
            local = Op::op(local, j < cols ? value(j) : Op::identity());
            v[k] = local;
        }
        float scan = local;
        for (int o = 1; o < 32; o <<= 1) {
            float up = __shfl_up_sync(0xffffffffu, scan, o);
            if (lane >= o) scan = Op::op(up, scan);
        }
        float exclusive_in_warp = __shfl_up_sync(0xffffffffu, scan, 1);
        if (lane == 0) exclusive_in_warp = Op::identity();
        if (lane == 31) warp_totals[warp] = scan;
        __syncthreads();
        if (warp == 0) {
            float t = lane < kThreads / 32 ? warp_totals[lane] : Op::identity();
            for (int o = 1; o < 32; o <<= 1) {
                float up = __shfl_up_sync(0xffffffffu, t, o);
                if (lane >= o) t = Op::op(up, t);
            }
            if (lane < kThreads / 32) warp_totals[lane] = t;
        }
        __syncthreads();
        float before = Op::op(carry, Op::op(warp > 0 ? warp_totals[warp - 1] : Op::identity(), exclusive_in_warp));
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
            int64_t j = tile + threadIdx.x * kPerThread + k;
            if (j < cols) store(j, Op::op(before, v[k]));
        }
        __syncthreads();
        if (threadIdx.x == 0) carry = Op::op(carry, warp_totals[kThreads / 32 - 1]);
        __syncthreads();
    }
}

__global__ void masked_cumsum_rows_kernel(const float* __restrict__ x, const bool* __restrict__ mask,
                                          float* __restrict__ y, int64_t cols) {
    const float* row = x + blockIdx.x * cols;
    const bool* keep = mask + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    scan_row<Add>(cols, [&](int64_t j) { return keep[j] ? row[j] : 0.f; }, [&](int64_t j, float v) { out[j] = v; });
}

torch::Tensor masked_cumsum_rows(torch::Tensor x, torch::Tensor mask) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "masked_cumsum_rows: float32 CUDA x");
    TORCH_CHECK(mask.is_cuda() && mask.scalar_type() == torch::kBool && mask.sizes() == x.sizes(),
                "masked_cumsum_rows: a bool mask of x's shape");
    auto input = x.contiguous();
    auto keep = mask.contiguous();
    auto out = torch::empty_like(input);
    int64_t cols = input.size(-1);
    int64_t rows = cols == 0 ? 0 : input.numel() / cols;
    if (rows == 0) return out;
    masked_cumsum_rows_kernel<<<(unsigned)rows, kThreads>>>(input.data_ptr<float>(), keep.data_ptr<bool>(),
                                                            out.data_ptr<float>(), cols);
    return out;
}
"""

masked_cumsum_rows_cpp_source = """
torch::Tensor masked_cumsum_rows(torch::Tensor x, torch::Tensor mask);
"""

masked_cumsum_rows = load_inline(
    name="masked_cumsum_rows",
    cpp_sources=masked_cumsum_rows_cpp_source,
    cuda_sources=masked_cumsum_rows_source,
    functions=["masked_cumsum_rows"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        assert self.dim in (-1, x.dim() - 1), "along the last dimension"
        return masked_cumsum_rows.masked_cumsum_rows(x, mask)

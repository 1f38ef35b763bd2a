"""KernelBench level 1, problem 92: exclusive cumulative sum along dim 1 (0, x0, x0+x1, ...), one blockwise scan."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

exclusive_cumsum_rows_source = r"""
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

__global__ void exclusive_cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    if (threadIdx.x == 0) out[0] = 0.f;
    // The inclusive scan of x[0 .. cols-2], written one place to the right.
    scan_row<Add>(cols - 1, [&](int64_t j) { return row[j]; }, [&](int64_t j, float v) { out[j + 1] = v; });
}

torch::Tensor exclusive_cumsum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 1, "exclusive_cumsum_rows: float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t cols = input.size(-1);
    int64_t rows = cols == 0 ? 0 : input.numel() / cols;
    if (rows == 0) return out;
    exclusive_cumsum_rows_kernel<<<(unsigned)rows, kThreads>>>(input.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

exclusive_cumsum_rows_cpp_source = """
torch::Tensor exclusive_cumsum_rows(torch::Tensor x);
"""

exclusive_cumsum_rows = load_inline(
    name="exclusive_cumsum_rows",
    cpp_sources=exclusive_cumsum_rows_cpp_source,
    cuda_sources=exclusive_cumsum_rows_source,
    functions=["exclusive_cumsum_rows"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim in (-1, x.dim() - 1), "along the last dimension"
        return exclusive_cumsum_rows.exclusive_cumsum_rows(x)

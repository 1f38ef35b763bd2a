"""KernelBench level 1, problem 40: LayerNorm over (features, dim1, dim2): chunked double statistics, one fused normalise-and-affine pass."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layer_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
// Mean and 1/sqrt(var + eps) of contiguous segments (a sample for LayerNorm, a plane for InstanceNorm, a
// group of channels for GroupNorm): blocks sum chunks of a segment in double, one thread per segment
// combines them. Biased variance, as PyTorch's normalisations use.
constexpr int kThreads = 512;
constexpr int64_t kChunk = 1 << 16;

__global__ void segment_partial_kernel(const float* __restrict__ x, int64_t length, int64_t chunks,
                                       double* __restrict__ partial) {
    __shared__ double s1[kThreads / 32], s2[kThreads / 32];
    int64_t segment = blockIdx.y, chunk = blockIdx.x;
    const float* p = x + segment * length;
    int64_t begin = chunk * kChunk, end = begin + kChunk < length ? begin + kChunk : length;
    float a = 0.f, b = 0.f;
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
        float v = p[i];
        a += v;
        b = fmaf(v, v, b);
    }
    double da = a, db = b;
    for (int o = 16; o > 0; o >>= 1) {
        da += __shfl_xor_sync(0xffffffffu, da, o);
        db += __shfl_xor_sync(0xffffffffu, db, o);
    }
    if ((threadIdx.x & 31) == 0) {
        s1[threadIdx.x >> 5] = da;
        s2[threadIdx.x >> 5] = db;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double ta = 0.0, tb = 0.0;
        for (int w = 0; w < kThreads / 32; ++w) {
            ta += s1[w];
            tb += s2[w];
        }
        partial[(segment * chunks + chunk) * 2] = ta;
        partial[(segment * chunks + chunk) * 2 + 1] = tb;
    }
}

__global__ void segment_finish_kernel(const double* __restrict__ partial, int64_t segments, int64_t chunks,
                                      int64_t length, double eps, float* __restrict__ mean, float* __restrict__ rstd) {
    int64_t s = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (s >= segments) return;
    double a = 0.0, b = 0.0;
    for (int64_t c = 0; c < chunks; ++c) {
        a += partial[(s * chunks + c) * 2];
        b += partial[(s * chunks + c) * 2 + 1];
    }
    double m = a / (double)length;
    double var = b / (double)length - m * m;
    mean[s] = (float)m;
    rstd[s] = (float)(1.0 / sqrt((var > 0.0 ? var : 0.0) + eps));
}

// Fills mean and rstd (segments entries each) for x viewed as (segments, length).
static void segment_stats(const torch::Tensor& x, int64_t segments, int64_t length, double eps, torch::Tensor& mean,
                          torch::Tensor& rstd) {
    int64_t chunks = (length + kChunk - 1) / kChunk;
    auto partial = torch::empty({segments * chunks * 2}, x.options().dtype(torch::kFloat64));
    mean = torch::empty({segments}, x.options());
    rstd = torch::empty({segments}, x.options());
    dim3 grid((unsigned)chunks, (unsigned)segments);
    segment_partial_kernel<<<grid, kThreads>>>(x.data_ptr<float>(), length, chunks, partial.data_ptr<double>());
    segment_finish_kernel<<<(unsigned)((segments + 255) / 256), 256>>>(partial.data_ptr<double>(), segments, chunks,
                                                                       length, eps, mean.data_ptr<float>(),
                                                                       rstd.data_ptr<float>());
}

static int grid_for(int64_t n) {
    int64_t blocks = (n + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    return (int)(blocks < 1 ? 1 : blocks);
}

__global__ void layer_norm_apply_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, const float* __restrict__ mean,
                                        const float* __restrict__ rstd, float* __restrict__ y, int64_t n,
                                        int64_t length) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        int64_t s = i / length, j = i % length;
        y[i] = (x[i] - mean[s]) * rstd[s] * w[j] + b[j];
    }
}

torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layer_norm: float32 CUDA x");
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    int64_t length = w.numel();
    TORCH_CHECK(length > 0 && input.numel() % length == 0, "layer_norm: normalized shape does not divide x");
    int64_t segments = input.numel() / length;
    torch::Tensor mean, rstd;
    segment_stats(input, segments, length, eps, mean, rstd);
    auto y = torch::empty_like(input);
    layer_norm_apply_kernel<<<grid_for(input.numel()), 256>>>(input.data_ptr<float>(), w.data_ptr<float>(),
                                                               b.data_ptr<float>(), mean.data_ptr<float>(),
                                                               rstd.data_ptr<float>(), y.data_ptr<float>(),
                                                               input.numel(), length);
    return y;
}
"""

layer_norm_cpp_source = """
torch::Tensor layer_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);
"""

layer_norm = load_inline(
    name="layer_norm",
    cpp_sources=layer_norm_cpp_source,
    cuda_sources=layer_norm_source,
    functions=["layer_norm"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Holds the reference's parameters under the same names (ln.weight, ln.bias).
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm.layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)

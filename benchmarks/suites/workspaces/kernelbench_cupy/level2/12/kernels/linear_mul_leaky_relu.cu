// leaky_relu((x @ W^T + b) * multiplier, negative_slope): the tiled GEMM of gemm_tiled.cuh on the
// nn.Linear weight (N x K, read as B^T), the bias and elementwise tail applied before each store.
#include "gemm_tiled.cuh"

struct MulLeakyRelu {
    const float* bias;
    float multiplier, negative_slope;
    __device__ float operator()(float acc, int, int n) const {
        const float v = (acc + bias[n]) * multiplier;
        return v > 0.0f ? v : v * negative_slope;
    }
};

extern "C" __global__ void __launch_bounds__(gemm::kThreads)
linear_mul_leaky_relu(const float* x, const float* weight, const float* bias, float* y, int M, int N, int K,
                      float multiplier, float negative_slope) {
    gemm::tile<true>(x, weight, y, M, N, K, MulLeakyRelu{bias, multiplier, negative_slope});
}

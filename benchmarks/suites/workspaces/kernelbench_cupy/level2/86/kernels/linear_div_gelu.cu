// gelu((x @ W^T + b) / divisor), GELU in its exact erf form (F.gelu's default): the tiled GEMM of
// gemm_tiled.cuh on the nn.Linear weight (N x K, read as B^T), the tail applied before each store.
#include "gemm_tiled.cuh"

struct DivGelu {
    const float* bias;
    float divisor;
    __device__ float operator()(float acc, int, int n) const {
        const float v = (acc + bias[n]) / divisor;
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
};

extern "C" __global__ void __launch_bounds__(gemm::kThreads)
linear_div_gelu(const float* x, const float* weight, const float* bias, float* y, int M, int N, int K,
                float divisor) {
    gemm::tile<true>(x, weight, y, M, N, K, DivGelu{bias, divisor});
}

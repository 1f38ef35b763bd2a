// relu((x @ W^T + b - subtract) * multiply): the tiled GEMM of gemm_tiled.cuh on the nn.Linear weight
// (N x K, read as B^T), the bias and elementwise tail applied to each value before it is stored.
#include "gemm_tiled.cuh"

struct SubMulRelu {
    const float* bias;
    float subtract, multiply;
    __device__ float operator()(float acc, int, int n) const {
        const float v = ((acc + bias[n]) - subtract) * multiply;
        return v > 0.0f ? v : 0.0f;
    }
};

extern "C" __global__ void __launch_bounds__(gemm::kThreads)
linear_sub_mul_relu(const float* x, const float* weight, const float* bias, float* y, int M, int N, int K,
                    float subtract, float multiply) {
    gemm::tile<true>(x, weight, y, M, N, K, SubMulRelu{bias, subtract, multiply});
}

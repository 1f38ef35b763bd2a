// relu(x @ W^T + bias), where the nn.Linear has no bias and `bias` is the module's own parameter:
// the tiled GEMM of gemm_tiled.cuh on the weight (N x K, read as B^T), the add and ReLU before each store.
#include "gemm_tiled.cuh"

struct AddRelu {
    const float* bias;
    __device__ float operator()(float acc, int, int n) const {
        const float v = acc + bias[n];
        return v > 0.0f ? v : 0.0f;
    }
};

extern "C" __global__ void __launch_bounds__(gemm::kThreads)
linear_add_relu(const float* x, const float* weight, const float* bias, float* y, int M, int N, int K) {
    gemm::tile<true>(x, weight, y, M, N, K, AddRelu{bias});
}

// C = A @ B for row-major A (M x K) and B (K x N): the tiled GEMM of gemm_tiled.cuh (128 x 128 tiles,
// two stages of dynamic shared memory, fp32 FMA), stored as computed.
#include "gemm_tiled.cuh"

struct Store {
    __device__ float operator()(float acc, int, int) const { return acc; }
};

extern "C" __global__ void __launch_bounds__(gemm::kThreads)
matmul_nn(const float* A, const float* B, float* C, int M, int N, int K) {
    gemm::tile<false>(A, B, C, M, N, K, Store{});
}

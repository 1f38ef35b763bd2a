// GELU as torch.nn.functional.gelu's default (approximate='none'): x / 2 * (1 + erf(x / sqrt(2))),
// elementwise (elementwise.cuh). erff is the exact form (no tanh, whose fast-math version is too coarse).
#include "elementwise.cuh"

struct Gelu {
    __device__ float operator()(float v) const { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }
};

extern "C" __global__ void __launch_bounds__(256) gelu_kernel(const float* x, float* y, long long n) {
    map_elementwise(x, y, n, Gelu{});
}

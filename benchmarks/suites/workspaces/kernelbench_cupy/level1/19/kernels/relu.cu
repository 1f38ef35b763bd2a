// ReLU, max(x, 0), elementwise (elementwise.cuh: grid-stride, float4 where aligned).
#include "elementwise.cuh"

struct Relu {
    __device__ float operator()(float v) const { return v > 0.0f ? v : 0.0f; }
};

extern "C" __global__ void __launch_bounds__(256) relu_kernel(const float* x, float* y, long long n) {
    map_elementwise(x, y, n, Relu{});
}

// Sigmoid, 1 / (1 + exp(-x)), elementwise (elementwise.cuh: grid-stride, float4 where aligned).
// expf and the division stay within a few ulp under --use_fast_math too.
#include "elementwise.cuh"

struct Sigmoid {
    __device__ float operator()(float v) const { return 1.0f / (1.0f + expf(-v)); }
};

extern "C" __global__ void __launch_bounds__(256) sigmoid_kernel(const float* x, float* y, long long n) {
    map_elementwise(x, y, n, Sigmoid{});
}

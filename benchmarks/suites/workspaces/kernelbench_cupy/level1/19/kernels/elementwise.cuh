// y[i] = op(x[i]) over n floats, grid-stride, 64-bit indices (n may pass 2^31).
// float4 loads and stores when both pointers are 16-byte aligned (a tensor may start anywhere), then
// the tail of n % 4 elements one by one; otherwise one by one throughout.
#pragma once

template <class Op>
__device__ __forceinline__ void map_elementwise(const float* __restrict__ x, float* __restrict__ y,
                                                long long n, const Op& op) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool aligned =
        ((reinterpret_cast<unsigned long long>(x) | reinterpret_cast<unsigned long long>(y)) & 15ull) == 0;
    long long done = 0;
    if (aligned) {
        const long long n4 = n / 4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = first; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = op(v.x);
            v.y = op(v.y);
            v.z = op(v.z);
            v.w = op(v.w);
            y4[i] = v;
        }
        done = n4 * 4;
    }
    for (long long i = done + first; i < n; i += stride) y[i] = op(x[i]);
}

// Elementwise ReLU for the CuPy language: 16-byte vector loads for the bulk, a scalar kernel for the tail.
extern "C" __global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n_vec) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_vec; i += stride) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f);
    v.y = fmaxf(v.y, 0.f);
    v.z = fmaxf(v.z, 0.f);
    v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}

extern "C" __global__ void relu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
  long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

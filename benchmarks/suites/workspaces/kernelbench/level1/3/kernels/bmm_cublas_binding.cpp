#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include <climits>

#include "../binding_registry.h"

extern "C" int bmm_cublas_launcher(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                                   int64_t k, cudaStream_t stream);

// torch.bmm(A, B): A (batch, M, K), B (batch, K, N) -> (batch, M, N).
static torch::Tensor bmm_cublas_forward(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dim() == 3 && b.dim() == 3, "bmm_cublas: 3-D CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "bmm_cublas: float32 only");
  TORCH_CHECK(a.get_device() == b.get_device(), "bmm_cublas: A and B on different devices");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm_cublas: shapes do not match");
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  TORCH_CHECK(batch < INT_MAX && m < INT_MAX && n < INT_MAX && k < INT_MAX, "bmm_cublas: a dimension exceeds int range");
  const c10::cuda::CUDAGuard guard(a.device());
  torch::Tensor x = a.contiguous();
  torch::Tensor y = b.contiguous();
  torch::Tensor out = torch::empty({batch, m, n}, x.options());
  int status = bmm_cublas_launcher(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), batch, m, n, k,
                                   c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "bmm_cublas: cuBLAS failed (", status, ")");
  return out;
}

static void register_bmm_cublas(pybind11::module& m) {
  m.def("bmm_cublas", &bmm_cublas_forward, "Batched matrix product through cuBLAS");
}

REGISTER_BINDING(bmm_cublas, register_bmm_cublas)

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include <climits>

#include "../binding_registry.h"

extern "C" int matmul_nt_launcher(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool trans_a,
                               bool trans_b, cudaStream_t stream);

// C = A @ B.T: A is (M, K), B is (N, K).
static torch::Tensor matmul_nt_forward(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dim() == 2 && b.dim() == 2, "matmul_nt: 2-D CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "matmul_nt: float32 only");
  TORCH_CHECK(a.get_device() == b.get_device(), "matmul_nt: A and B on different devices");
  const bool trans_a = false, trans_b = true;
  const int64_t m = trans_a ? a.size(1) : a.size(0);
  const int64_t k = trans_a ? a.size(0) : a.size(1);
  const int64_t n = trans_b ? b.size(0) : b.size(1);
  TORCH_CHECK((trans_b ? b.size(1) : b.size(0)) == k, "matmul_nt: inner dimensions differ");
  TORCH_CHECK(m < INT_MAX && n < INT_MAX && k < INT_MAX, "matmul_nt: a dimension exceeds cuBLAS's int range");
  const c10::cuda::CUDAGuard guard(a.device());
  torch::Tensor x = a.contiguous();
  torch::Tensor y = b.contiguous();
  torch::Tensor out = torch::empty({m, n}, x.options());
  int status = matmul_nt_launcher(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), m, n, k, trans_a,
                               trans_b, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "matmul_nt: cuBLAS failed (", status, ")");
  return out;
}

static void register_matmul_nt(pybind11::module& m) { m.def("matmul_nt", &matmul_nt_forward, "C = A @ B.T through cuBLAS"); }

REGISTER_BINDING(matmul_nt, register_matmul_nt)

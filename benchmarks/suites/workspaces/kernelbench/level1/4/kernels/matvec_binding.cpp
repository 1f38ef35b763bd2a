#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int matvec_launcher(const float* a, const float* x, float* y, int64_t rows, int64_t k, cudaStream_t stream);

// torch.matmul(A, B) for A (M, K) and B (K, 1): a (M, 1) result.
static torch::Tensor matvec_forward(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "matvec: CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "matvec: float32 only");
  TORCH_CHECK(a.get_device() == b.get_device(), "matvec: A and B on different devices");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && b.size(1) == 1, "matvec: A (M, K) and B (K, 1)");
  TORCH_CHECK(b.size(0) == a.size(1), "matvec: inner dimensions differ");
  const c10::cuda::CUDAGuard guard(a.device());
  torch::Tensor matrix = a.contiguous();
  torch::Tensor vector = b.contiguous();
  torch::Tensor out = torch::empty({matrix.size(0), 1}, matrix.options());
  int status = matvec_launcher(matrix.data_ptr<float>(), vector.data_ptr<float>(), out.data_ptr<float>(), matrix.size(0),
                               matrix.size(1), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "matvec: kernel launch failed (", status, ")");
  return out;
}

static void register_matvec(pybind11::module& m) { m.def("matvec", &matvec_forward, "A @ x for a column vector x"); }

REGISTER_BINDING(matvec, register_matvec)

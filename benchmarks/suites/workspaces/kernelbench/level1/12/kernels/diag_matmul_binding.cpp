#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int diag_matmul_launcher(const float* d, const float* b, float* c, int64_t rows, int64_t cols,
                                    cudaStream_t stream);

// diag(A) @ B for A (N,) and B (N, M): an (N, M) result.
static torch::Tensor diag_matmul_forward(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "diag_matmul: CUDA tensors");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "diag_matmul: float32 only");
  TORCH_CHECK(a.get_device() == b.get_device(), "diag_matmul: A and B on different devices");
  TORCH_CHECK(a.dim() == 1 && b.dim() == 2 && a.size(0) == b.size(0), "diag_matmul: A (N,) and B (N, M)");
  const c10::cuda::CUDAGuard guard(b.device());
  torch::Tensor diagonal = a.contiguous();
  torch::Tensor matrix = b.contiguous();
  torch::Tensor out = torch::empty_like(matrix);
  int status = diag_matmul_launcher(diagonal.data_ptr<float>(), matrix.data_ptr<float>(), out.data_ptr<float>(),
                                    matrix.size(0), matrix.size(1), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "diag_matmul: kernel launch failed (", status, ")");
  return out;
}

static void register_diag_matmul(pybind11::module& m) {
  m.def("diag_matmul", &diag_matmul_forward, "diag(A) @ B as a row scaling");
}

REGISTER_BINDING(diag_matmul, register_diag_matmul)

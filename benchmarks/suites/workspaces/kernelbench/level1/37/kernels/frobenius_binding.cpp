#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int frobenius_launcher(const float* x, float* y, int64_t n, double* partial, float* norm,
                                  cudaStream_t stream);
extern "C" int frobenius_scratch_doubles();

static torch::Tensor frobenius_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "frobenius: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  torch::Tensor partial = torch::empty({frobenius_scratch_doubles()}, input.options().dtype(torch::kFloat64));
  torch::Tensor norm = torch::empty({1}, input.options());
  int status = frobenius_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(),
                                  partial.data_ptr<double>(), norm.data_ptr<float>(),
                                  c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "frobenius: kernel launch failed (", status, ")");
  return out;
}

static void register_frobenius(pybind11::module& m) { m.def("frobenius", &frobenius_forward, "x / Frobenius norm"); }

REGISTER_BINDING(frobenius, register_frobenius)

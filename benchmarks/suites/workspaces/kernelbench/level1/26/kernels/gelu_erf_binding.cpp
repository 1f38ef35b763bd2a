#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int gelu_erf_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor gelu_erf_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_erf: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = gelu_erf_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "gelu_erf: kernel launch failed (", status, ")");
  return out;
}

static void register_gelu_erf(pybind11::module& m) { m.def("gelu_erf", &gelu_erf_forward, "GELU (exact): 0.5 x (1 + erf(x / sqrt 2))"); }

REGISTER_BINDING(gelu_erf, register_gelu_erf)

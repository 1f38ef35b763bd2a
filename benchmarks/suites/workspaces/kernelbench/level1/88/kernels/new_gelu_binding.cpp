#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int new_gelu_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor new_gelu_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = new_gelu_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "new_gelu: kernel launch failed (", status, ")");
  return out;
}

static void register_new_gelu(pybind11::module& m) { m.def("new_gelu", &new_gelu_forward, "minGPT's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"); }

REGISTER_BINDING(new_gelu, register_new_gelu)

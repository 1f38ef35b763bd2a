#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int elu_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor elu_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "elu: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = elu_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "elu: kernel launch failed (", status, ")");
  return out;
}

static void register_elu(pybind11::module& m) { m.def("elu", &elu_forward, "ELU: x if x > 0 else alpha * (exp(x) - 1)"); }

REGISTER_BINDING(elu, register_elu)

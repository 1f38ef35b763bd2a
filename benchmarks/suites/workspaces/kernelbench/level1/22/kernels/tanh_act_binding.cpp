#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int tanh_act_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor tanh_act_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "tanh_act: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = tanh_act_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "tanh_act: kernel launch failed (", status, ")");
  return out;
}

static void register_tanh_act(pybind11::module& m) { m.def("tanh_act", &tanh_act_forward, "Tanh"); }

REGISTER_BINDING(tanh_act, register_tanh_act)

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int leaky_relu_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor leaky_relu_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "leaky_relu: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = leaky_relu_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "leaky_relu: kernel launch failed (", status, ")");
  return out;
}

static void register_leaky_relu(pybind11::module& m) { m.def("leaky_relu", &leaky_relu_forward, "LeakyReLU: x if x > 0 else slope * x"); }

REGISTER_BINDING(leaky_relu, register_leaky_relu)

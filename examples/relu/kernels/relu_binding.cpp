#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" void relu_launcher(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "relu: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu: x must be float32");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  relu_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(),
                c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

static void register_relu(pybind11::module& m) { m.def("relu", &relu_forward, "ReLU (CUDA)"); }

REGISTER_BINDING(relu, register_relu)

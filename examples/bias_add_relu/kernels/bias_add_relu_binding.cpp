#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" void bias_add_relu_launcher(const float* x, const float* bias, float* y, int64_t n, int64_t features,
                                       cudaStream_t stream);

static torch::Tensor bias_add_relu_forward(const torch::Tensor& x, const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_add_relu: tensors must be on the GPU");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "bias_add_relu: tensors must be float32");
  TORCH_CHECK(bias.dim() == 1 && x.size(-1) == bias.size(0), "bias_add_relu: bias must match the last dim of x");
  torch::Tensor input = x.contiguous();
  torch::Tensor b = bias.contiguous();
  torch::Tensor out = torch::empty_like(input);
  bias_add_relu_launcher(input.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), input.numel(),
                         b.numel(), c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

static void register_bias_add_relu(pybind11::module& m) {
  m.def("bias_add_relu", &bias_add_relu_forward, "relu(x + bias) (CUDA)");
}

REGISTER_BINDING(bias_add_relu, register_bias_add_relu)

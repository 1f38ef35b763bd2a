#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int softplus_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor softplus_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softplus: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = softplus_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "softplus: kernel launch failed (", status, ")");
  return out;
}

static void register_softplus(pybind11::module& m) { m.def("softplus", &softplus_forward, "Softplus (beta 1, threshold 20): x if x > 20 else log(1 + exp(x))"); }

REGISTER_BINDING(softplus, register_softplus)

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int softsign_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor softsign_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softsign: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = softsign_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "softsign: kernel launch failed (", status, ")");
  return out;
}

static void register_softsign(pybind11::module& m) { m.def("softsign", &softsign_forward, "Softsign: x / (1 + |x|)"); }

REGISTER_BINDING(softsign, register_softsign)

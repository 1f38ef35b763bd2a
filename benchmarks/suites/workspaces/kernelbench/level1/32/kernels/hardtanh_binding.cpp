#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int hardtanh_launcher(const float* x, float* y, int64_t n, float p, cudaStream_t stream);

static torch::Tensor hardtanh_forward(const torch::Tensor& x, double p) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "hardtanh: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int status = hardtanh_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), static_cast<float>(p),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "hardtanh: kernel launch failed (", status, ")");
  return out;
}

static void register_hardtanh(pybind11::module& m) { m.def("hardtanh", &hardtanh_forward, "HardTanh: clamp(x, -1, 1)"); }

REGISTER_BINDING(hardtanh, register_hardtanh)

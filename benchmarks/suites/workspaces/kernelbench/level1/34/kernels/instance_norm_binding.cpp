#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int instance_norm_launcher(const float* x, float* y, int64_t planes, int64_t size, double eps,
                                      cudaStream_t stream);

// nn.InstanceNorm2d(num_features) with its defaults (no affine parameters, no running statistics) on an
// (N, C, H, W) or (C, H, W) input: each H x W plane normalised by its own mean and biased variance.
static torch::Tensor instance_norm_forward(const torch::Tensor& x, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "instance_norm: float32 CUDA input");
  TORCH_CHECK(x.dim() == 3 || x.dim() == 4, "instance_norm: a 3-D or 4-D input");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  const int64_t size = input.size(-1) * input.size(-2);
  const int64_t planes = size > 0 ? input.numel() / size : 0;
  int status = instance_norm_launcher(input.data_ptr<float>(), out.data_ptr<float>(), planes, size, eps,
                                      c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "instance_norm: kernel launch failed (", status, ")");
  return out;
}

static void register_instance_norm(pybind11::module& m) {
  m.def("instance_norm", &instance_norm_forward, "InstanceNorm2d, per-plane statistics");
}

REGISTER_BINDING(instance_norm, register_instance_norm)

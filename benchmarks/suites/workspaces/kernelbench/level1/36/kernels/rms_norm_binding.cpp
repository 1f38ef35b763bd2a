#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int rms_norm_launcher(const float* x, float* y, int64_t batches, int64_t channels, int64_t inner, float eps,
                                 cudaStream_t stream);

static torch::Tensor rms_norm_forward(const torch::Tensor& x, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "rms_norm: x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() >= 2, "rms_norm: x needs a channel dimension (dim 1)");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int64_t inner = 1;
  for (int64_t d = 2; d < input.dim(); ++d) inner *= input.size(d);
  int status = rms_norm_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.size(0), input.size(1), inner,
                                 static_cast<float>(eps), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "rms_norm: kernel launch failed (", status, ")");
  return out;
}

static void register_rms_norm(pybind11::module& m) { m.def("rms_norm", &rms_norm_forward, "RMSNorm over dim 1"); }

REGISTER_BINDING(rms_norm, register_rms_norm)

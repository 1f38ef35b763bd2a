#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int l2_normalize_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor l2_normalize_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "l2_normalize: x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "l2_normalize: x needs a last dimension");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int64_t cols = input.size(-1);
  int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  int status = l2_normalize_launcher(input.data_ptr<float>(), out.data_ptr<float>(), rows, cols,
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "l2_normalize: kernel launch failed (", status, ")");
  return out;
}

static void register_l2_normalize(pybind11::module& m) { m.def("l2_normalize", &l2_normalize_forward, "x / ||x||_2 per row"); }

REGISTER_BINDING(l2_normalize, register_l2_normalize)

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int softmax_rows_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor softmax_rows_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "softmax_rows: x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "softmax_rows: x needs a last dimension");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int64_t cols = input.size(-1);
  int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  int status = softmax_rows_launcher(input.data_ptr<float>(), out.data_ptr<float>(), rows, cols,
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "softmax_rows: kernel launch failed (", status, ")");
  return out;
}

static void register_softmax_rows(pybind11::module& m) { m.def("softmax_rows", &softmax_rows_forward, "row softmax"); }

REGISTER_BINDING(softmax_rows, register_softmax_rows)

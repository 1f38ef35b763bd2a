#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int log_softmax_rows_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor log_softmax_rows_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "log_softmax_rows: x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "log_softmax_rows: x needs a last dimension");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int64_t cols = input.size(-1);
  int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  int status = log_softmax_rows_launcher(input.data_ptr<float>(), out.data_ptr<float>(), rows, cols,
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "log_softmax_rows: kernel launch failed (", status, ")");
  return out;
}

static void register_log_softmax_rows(pybind11::module& m) { m.def("log_softmax_rows", &log_softmax_rows_forward, "row log-softmax"); }

REGISTER_BINDING(log_softmax_rows, register_log_softmax_rows)

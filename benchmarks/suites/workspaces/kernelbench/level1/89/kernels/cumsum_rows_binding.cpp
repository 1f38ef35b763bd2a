#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int cumsum_rows_launcher(const float* x, float* y, int64_t rows, int64_t cols, bool reverse,
                                    cudaStream_t stream);

static torch::Tensor cumsum_rows_forward(const torch::Tensor& x, bool reverse) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "cumsum_rows: x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() >= 1, "cumsum_rows: x needs a last dimension");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty_like(input);
  int64_t cols = input.size(-1);
  int64_t rows = cols == 0 ? 0 : input.numel() / cols;
  int status = cumsum_rows_launcher(input.data_ptr<float>(), out.data_ptr<float>(), rows, cols, reverse,
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "cumsum_rows: kernel launch failed (", status, ")");
  return out;
}

static void register_cumsum_rows(pybind11::module& m) { m.def("cumsum_rows", &cumsum_rows_forward, "prefix sums along the last dimension"); }

REGISTER_BINDING(cumsum_rows, register_cumsum_rows)

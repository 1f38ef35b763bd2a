#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" void row_sum_launcher(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);

// Sums a 2-D float32 tensor over its last dimension; returns shape (rows, 1).
static torch::Tensor row_sum_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2, "row_sum: x must be a 2-D CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_sum: x must be float32");
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty({input.size(0), 1}, input.options());
  row_sum_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.size(0), input.size(1),
                   c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

static void register_row_sum(pybind11::module& m) { m.def("row_sum", &row_sum_forward, "row sums (CUDA)"); }

REGISTER_BINDING(row_sum, register_row_sum)

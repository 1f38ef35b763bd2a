#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int sum_dim_launcher(const float* x, float* y, int64_t batches, int64_t reduce, int64_t inner,
                               cudaStream_t stream);

// Reduce `dim` of x (any rank), keeping it as a size-1 dimension when keepdim.
static torch::Tensor sum_dim_forward(const torch::Tensor& x, int64_t dim, bool keepdim) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "sum_dim: x must be a float32 CUDA tensor");
  torch::Tensor input = x.contiguous();
  dim = dim < 0 ? dim + input.dim() : dim;
  TORCH_CHECK(dim >= 0 && dim < input.dim(), "sum_dim: bad dim");
  TORCH_CHECK(input.size(dim) > 0, "sum_dim: cannot reduce an empty dimension");
  int64_t batches = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) batches *= input.size(d);
  for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
  std::vector<int64_t> shape = input.sizes().vec();
  if (keepdim) {
    shape[dim] = 1;
  } else {
    shape.erase(shape.begin() + dim);
  }
  torch::Tensor out = torch::empty(shape, input.options().dtype(torch::kFloat32));
  int status = sum_dim_launcher(input.data_ptr<float>(), out.data_ptr<float>(), batches, input.size(dim), inner,
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "sum_dim: kernel launch failed (", status, ")");
  return out;
}

static void register_sum_dim(pybind11::module& m) { m.def("sum_dim", &sum_dim_forward, "Sum"); }

REGISTER_BINDING(sum_dim, register_sum_dim)

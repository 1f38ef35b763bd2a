#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int64_t layer_norm_chunks(int64_t rows, int64_t cols);
extern "C" int layer_norm_partial_launcher(const float* x, int64_t rows, int64_t cols, int64_t chunks,
                                           double* partial, cudaStream_t stream);
extern "C" int layer_norm_stats_launcher(const double* partial, int64_t rows, int64_t cols, int64_t chunks, double eps,
                                         float* stats, cudaStream_t stream);
extern "C" int layer_norm_apply_launcher(const float* x, const float* w, const float* b, const float* stats, float* y,
                                         int64_t rows, int64_t cols, cudaStream_t stream);

// nn.LayerNorm(normalized_shape) with an affine weight and bias: x (..., *normalized_shape), normalized over the
// trailing weight.dim() dimensions. Three kernels in turn on the launch stream: partial sums, per-row statistics,
// then the normalisation (kernels/layer_norm.cu).
static torch::Tensor layer_norm_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                        double eps) {
  for (const torch::Tensor* t : {&x, &weight, &bias}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32, "layer_norm: float32 CUDA tensors");
    TORCH_CHECK(t->get_device() == x.get_device(), "layer_norm: tensors on different devices");
  }
  TORCH_CHECK(weight.sizes() == bias.sizes(), "layer_norm: weight and bias differ in shape");
  const int64_t normalized = weight.dim();
  TORCH_CHECK(x.dim() >= normalized, "layer_norm: input has fewer dimensions than normalized_shape");
  for (int64_t d = 0; d < normalized; ++d) {
    TORCH_CHECK(x.size(x.dim() - normalized + d) == weight.size(d), "layer_norm: trailing sizes differ from weight's");
  }
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor input = x.contiguous();
  torch::Tensor w = weight.contiguous();
  torch::Tensor b = bias.contiguous();
  const int64_t cols = w.numel();
  const int64_t rows = cols > 0 ? input.numel() / cols : 0;
  torch::Tensor out = torch::empty_like(input);
  if (rows == 0 || cols == 0) return out;
  const int64_t chunks = layer_norm_chunks(rows, cols);
  torch::Tensor partial = torch::empty({rows * chunks * 2}, input.options().dtype(torch::kFloat64));
  torch::Tensor stats = torch::empty({rows * 2}, input.options());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  int status = layer_norm_partial_launcher(input.data_ptr<float>(), rows, cols, chunks, partial.data_ptr<double>(),
                                           stream);
  TORCH_CHECK(status == 0, "layer_norm: partial sums failed to launch (", status, ")");
  status = layer_norm_stats_launcher(partial.data_ptr<double>(), rows, cols, chunks, eps, stats.data_ptr<float>(),
                                     stream);
  TORCH_CHECK(status == 0, "layer_norm: statistics failed to launch (", status, ")");
  status = layer_norm_apply_launcher(input.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                     stats.data_ptr<float>(), out.data_ptr<float>(), rows, cols, stream);
  TORCH_CHECK(status == 0, "layer_norm: normalisation failed to launch (", status, ")");
  return out;
}

static void register_layer_norm(pybind11::module& m) {
  m.def("layer_norm", &layer_norm_forward, "LayerNorm over the trailing dimensions, three kernels");
}

REGISTER_BINDING(layer_norm, register_layer_norm)

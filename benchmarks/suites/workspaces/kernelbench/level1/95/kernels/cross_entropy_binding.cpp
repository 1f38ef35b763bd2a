#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int cross_entropy_launcher(const float* logits, const int64_t* targets, float* scratch, float* out,
                                      int64_t rows, int64_t classes, cudaStream_t stream);

// F.cross_entropy(predictions, targets) with its defaults (mean reduction, ignore_index -100, no weights, no label
// smoothing) for predictions (N, C) float32 and targets (N,) int64: a 0-dim float32 result, as the reference's.
static torch::Tensor cross_entropy_forward(const torch::Tensor& predictions, const torch::Tensor& targets) {
  TORCH_CHECK(predictions.is_cuda() && predictions.scalar_type() == torch::kFloat32,
              "cross_entropy: float32 CUDA predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kInt64, "cross_entropy: int64 CUDA targets");
  TORCH_CHECK(predictions.get_device() == targets.get_device(), "cross_entropy: inputs on different devices");
  TORCH_CHECK(predictions.dim() == 2 && targets.dim() == 1 && targets.size(0) == predictions.size(0),
              "cross_entropy: predictions (N, C) and targets (N,)");
  const c10::cuda::CUDAGuard guard(predictions.device());
  torch::Tensor logits = predictions.contiguous();
  torch::Tensor classes = targets.contiguous();
  const int64_t rows = logits.size(0);
  torch::Tensor scratch = torch::empty({2 * rows + 1}, logits.options());
  torch::Tensor out = torch::empty({}, logits.options());
  int status = cross_entropy_launcher(logits.data_ptr<float>(), classes.data_ptr<int64_t>(), scratch.data_ptr<float>(),
                                      out.data_ptr<float>(), rows, logits.size(1),
                                      c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "cross_entropy: kernel launch failed (", status, ")");
  return out;
}

static void register_cross_entropy(pybind11::module& m) {
  m.def("cross_entropy", &cross_entropy_forward, "Cross entropy, mean over the batch");
}

REGISTER_BINDING(cross_entropy, register_cross_entropy)

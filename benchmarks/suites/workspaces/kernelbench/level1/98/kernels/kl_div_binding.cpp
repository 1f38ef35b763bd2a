#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int kl_div_launcher(const float* p, const float* t, int64_t n, int64_t batch, double* partial, float* out,
                               cudaStream_t stream);
extern "C" int kl_div_scratch_doubles();

// F.kl_div(torch.log(predictions), targets, reduction='batchmean'): a 0-dim float32 result, as the reference's.
static torch::Tensor kl_div_forward(const torch::Tensor& predictions, const torch::Tensor& targets) {
  TORCH_CHECK(predictions.is_cuda() && predictions.scalar_type() == torch::kFloat32, "kl_div: float32 CUDA predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kFloat32, "kl_div: float32 CUDA targets");
  TORCH_CHECK(predictions.get_device() == targets.get_device(), "kl_div: inputs on different devices");
  TORCH_CHECK(predictions.sizes() == targets.sizes(), "kl_div: predictions and targets differ in shape");
  TORCH_CHECK(predictions.dim() >= 1, "kl_div: batchmean needs a batch dimension");
  const c10::cuda::CUDAGuard guard(predictions.device());
  torch::Tensor p = predictions.contiguous();
  torch::Tensor t = targets.contiguous();
  torch::Tensor partial = torch::empty({kl_div_scratch_doubles()}, p.options().dtype(torch::kFloat64));
  torch::Tensor out = torch::empty({}, p.options());
  int status = kl_div_launcher(p.data_ptr<float>(), t.data_ptr<float>(), p.numel(), p.size(0),
                               partial.data_ptr<double>(), out.data_ptr<float>(),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "kl_div: kernel launch failed (", status, ")");
  return out;
}

static void register_kl_div(pybind11::module& m) {
  m.def("kl_div", &kl_div_forward, "KL divergence of log(predictions) and targets, batchmean");
}

REGISTER_BINDING(kl_div, register_kl_div)

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int hinge_loss_launcher(const float* p, const float* t, int64_t n, int64_t t_period, double* partial,
                               float* out, cudaStream_t stream);
extern "C" int hinge_loss_scratch_doubles();

static torch::Tensor hinge_loss_forward(const torch::Tensor& predictions, const torch::Tensor& targets) {
  TORCH_CHECK(predictions.is_cuda() && predictions.scalar_type() == torch::kFloat32, "hinge_loss: float32 CUDA predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kFloat32, "hinge_loss: float32 CUDA targets");
  torch::Tensor p = predictions.contiguous();
  torch::Tensor t = targets.contiguous();
  TORCH_CHECK(p.dim() >= 1 && t.dim() == 1 && t.size(0) == p.size(-1),
              "hinge_loss: targets must match the last dimension of predictions (broadcast)");
  torch::Tensor partial = torch::empty({hinge_loss_scratch_doubles()}, p.options().dtype(torch::kFloat64));
  torch::Tensor out = torch::empty({}, p.options());
  int status = hinge_loss_launcher(p.data_ptr<float>(), t.data_ptr<float>(), p.numel(), t.numel(), partial.data_ptr<double>(),
                               out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "hinge_loss: kernel launch failed (", status, ")");
  return out;
}

static void register_hinge_loss(pybind11::module& m) { m.def("hinge_loss", &hinge_loss_forward, "Hinge loss mean(clamp(1 - p * t, 0)), t broadcast over the last dimension"); }

REGISTER_BINDING(hinge_loss, register_hinge_loss)

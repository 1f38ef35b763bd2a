#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int mse_loss_launcher(const float* p, const float* t, int64_t n, int64_t t_period, double* partial,
                               float* out, cudaStream_t stream);
extern "C" int mse_loss_scratch_doubles();

static torch::Tensor mse_loss_forward(const torch::Tensor& predictions, const torch::Tensor& targets) {
  TORCH_CHECK(predictions.is_cuda() && predictions.scalar_type() == torch::kFloat32, "mse_loss: float32 CUDA predictions");
  TORCH_CHECK(targets.is_cuda() && targets.scalar_type() == torch::kFloat32, "mse_loss: float32 CUDA targets");
  torch::Tensor p = predictions.contiguous();
  torch::Tensor t = targets.contiguous();
  TORCH_CHECK(p.sizes() == t.sizes(), "mse_loss: predictions and targets differ in shape");
  torch::Tensor partial = torch::empty({mse_loss_scratch_doubles()}, p.options().dtype(torch::kFloat64));
  torch::Tensor out = torch::empty({}, p.options());
  int status = mse_loss_launcher(p.data_ptr<float>(), t.data_ptr<float>(), p.numel(), t.numel(), partial.data_ptr<double>(),
                               out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "mse_loss: kernel launch failed (", status, ")");
  return out;
}

static void register_mse_loss(pybind11::module& m) { m.def("mse_loss", &mse_loss_forward, "Mean squared error"); }

REGISTER_BINDING(mse_loss, register_mse_loss)

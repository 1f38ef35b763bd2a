#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int triplet_margin_launcher(const float* anchor, const float* positive, const float* negative, float* loss,
                                       float* out, int64_t rows, int64_t dim, float margin, float eps,
                                       cudaStream_t launch, cudaStream_t side);

// nn.TripletMarginLoss(margin) with its other defaults (p = 2, eps = 1e-6, swap = False, mean) on (N, D) inputs:
// a 0-dim float32 result, as the reference's.
static torch::Tensor triplet_margin_forward(const torch::Tensor& anchor, const torch::Tensor& positive,
                                            const torch::Tensor& negative, double margin) {
  for (const torch::Tensor* t : {&anchor, &positive, &negative}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32, "triplet_margin: float32 CUDA inputs");
    TORCH_CHECK(t->get_device() == anchor.get_device(), "triplet_margin: inputs on different devices");
    TORCH_CHECK(t->dim() == 2 && t->sizes() == anchor.sizes(), "triplet_margin: three (N, D) inputs of one shape");
  }
  const c10::cuda::CUDAGuard guard(anchor.device());
  torch::Tensor a = anchor.contiguous();
  torch::Tensor p = positive.contiguous();
  torch::Tensor n = negative.contiguous();
  const int64_t rows = a.size(0);
  torch::Tensor loss = torch::empty({rows > 0 ? rows : 1}, a.options());
  torch::Tensor out = torch::empty({}, a.options());
  // The side stream comes from the device's pool: never the launch stream itself.
  c10::cuda::CUDAStream launch = c10::cuda::getCurrentCUDAStream();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, a.get_device());
  if (side == launch) side = c10::cuda::getStreamFromPool(false, a.get_device());
  int status = triplet_margin_launcher(a.data_ptr<float>(), p.data_ptr<float>(), n.data_ptr<float>(),
                                       loss.data_ptr<float>(), out.data_ptr<float>(), rows, a.size(1),
                                       static_cast<float>(margin), 1e-6f, launch.stream(), side.stream());
  TORCH_CHECK(status == 0, "triplet_margin: CUDA error ", status);
  return out;
}

static void register_triplet_margin(pybind11::module& m) {
  m.def("triplet_margin", &triplet_margin_forward, "Triplet margin loss, mean over the batch (two streams)");
}

REGISTER_BINDING(triplet_margin, register_triplet_margin)

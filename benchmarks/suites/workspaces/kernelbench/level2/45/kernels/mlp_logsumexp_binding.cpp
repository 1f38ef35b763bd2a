#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include <climits>

#include "../binding_registry.h"

extern "C" int linear_gemm_launcher(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k,
                                    cudaStream_t stream);
extern "C" int bias_sigmoid_launcher(float* h, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
extern "C" int bias_logsumexp_launcher(const float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                                       cudaStream_t stream);

// logsumexp(linear2(sigmoid(linear1(x))), dim=1) for x (B, In): a (B,) result. Four launches in turn on the launch
// stream: GEMM, bias + sigmoid, GEMM, bias + logsumexp (kernels/mlp_logsumexp.cu).
static torch::Tensor mlp_logsumexp_forward(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& b1,
                                           const torch::Tensor& w2, const torch::Tensor& b2) {
  for (const torch::Tensor* t : {&x, &w1, &b1, &w2, &b2}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32, "mlp_logsumexp: float32 CUDA tensors only");
    TORCH_CHECK(t->get_device() == x.get_device(), "mlp_logsumexp: tensors on different devices");
  }
  TORCH_CHECK(x.dim() == 2 && w1.dim() == 2 && b1.dim() == 1 && w2.dim() == 2 && b2.dim() == 1,
              "mlp_logsumexp: x (B, In), weights (Out, In), biases (Out)");
  TORCH_CHECK(x.size(1) == w1.size(1) && b1.size(0) == w1.size(0), "mlp_logsumexp: first layer's shapes do not match");
  TORCH_CHECK(w2.size(1) == w1.size(0) && b2.size(0) == w2.size(0), "mlp_logsumexp: second layer's shapes do not match");
  const int64_t batch = x.size(0), in = x.size(1), hidden = w1.size(0), out_features = w2.size(0);
  TORCH_CHECK(batch < INT_MAX && in < INT_MAX && hidden < INT_MAX && out_features < INT_MAX,
              "mlp_logsumexp: a dimension exceeds cuBLAS's int range");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor input = x.contiguous();
  torch::Tensor first = w1.contiguous();
  torch::Tensor first_bias = b1.contiguous();
  torch::Tensor second = w2.contiguous();
  torch::Tensor second_bias = b2.contiguous();
  torch::Tensor h = torch::empty({batch, hidden}, input.options());
  torch::Tensor z = torch::empty({batch, out_features}, input.options());
  torch::Tensor out = torch::empty({batch}, input.options());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  int status = linear_gemm_launcher(input.data_ptr<float>(), first.data_ptr<float>(), h.data_ptr<float>(), batch,
                                    hidden, in, stream);
  TORCH_CHECK(status == 0, "mlp_logsumexp: first GEMM failed (", status, ")");
  status = bias_sigmoid_launcher(h.data_ptr<float>(), first_bias.data_ptr<float>(), batch, hidden, stream);
  TORCH_CHECK(status == 0, "mlp_logsumexp: bias + sigmoid failed to launch (", status, ")");
  status = linear_gemm_launcher(h.data_ptr<float>(), second.data_ptr<float>(), z.data_ptr<float>(), batch,
                                out_features, hidden, stream);
  TORCH_CHECK(status == 0, "mlp_logsumexp: second GEMM failed (", status, ")");
  status = bias_logsumexp_launcher(z.data_ptr<float>(), second_bias.data_ptr<float>(), out.data_ptr<float>(), batch,
                                   out_features, stream);
  TORCH_CHECK(status == 0, "mlp_logsumexp: bias + logsumexp failed to launch (", status, ")");
  return out;
}

static void register_mlp_logsumexp(pybind11::module& m) {
  m.def("mlp_logsumexp", &mlp_logsumexp_forward, "Linear, sigmoid, Linear, logsumexp over the features");
}

REGISTER_BINDING(mlp_logsumexp, register_mlp_logsumexp)

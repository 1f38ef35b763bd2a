#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int linear_mish_mish_launcher(const float* x, const float* w, const float* bias, float* y, int64_t m, int64_t n,
                               int64_t k, float a, float b, cudaStream_t stream);

static torch::Tensor linear_mish_mish_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                    double a, double b) {
  for (const torch::Tensor* t : {&x, &weight, &bias}) {
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == torch::kFloat32, "linear_mish_mish: float32 CUDA tensors only");
  }
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear_mish_mish: x (M, K), weight (N, K), bias (N)");
  TORCH_CHECK(x.size(1) == weight.size(1) && bias.size(0) == weight.size(0), "linear_mish_mish: shapes do not match");
  TORCH_CHECK(x.size(0) < (1LL << 31) && weight.size(0) < (1LL << 31) && x.size(1) < (1LL << 31), "linear_mish_mish: too large");
  torch::Tensor input = x.contiguous();
  torch::Tensor w = weight.contiguous();
  torch::Tensor bvec = bias.contiguous();
  torch::Tensor out = torch::empty({input.size(0), w.size(0)}, input.options());
  int status = linear_mish_mish_launcher(input.data_ptr<float>(), w.data_ptr<float>(), bvec.data_ptr<float>(), out.data_ptr<float>(),
                               input.size(0), w.size(0), input.size(1), static_cast<float>(a), static_cast<float>(b),
                               c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "linear_mish_mish: cuBLAS or the epilogue failed (", status, ")");
  return out;
}

static void register_linear_mish_mish(pybind11::module& m) { m.def("linear_mish_mish", &linear_mish_mish_forward, "Linear, Mish, Mish"); }

REGISTER_BINDING(linear_mish_mish, register_linear_mish_mish)

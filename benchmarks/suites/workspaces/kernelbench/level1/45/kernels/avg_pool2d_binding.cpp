#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int avg_pool2d_launcher(const float* x, float* y, int64_t planes, const int64_t* in, const int64_t* out,
                                   const int64_t* kernel, const int64_t* stride, const int64_t* padding,
                                   cudaStream_t stream);

// nn.AvgPool2d(kernel, stride, padding) with its defaults (ceil_mode=False, count_include_pad=True, no divisor
// override) on an (N, C, H, W) or (C, H, W) input; the kernel treats it as a 3-D pool with a depth window of 1.
static torch::Tensor avg_pool2d_forward(const torch::Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                        int64_t ph, int64_t pw) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "avg_pool2d: float32 CUDA input");
  TORCH_CHECK(x.dim() == 3 || x.dim() == 4, "avg_pool2d: a 3-D or 4-D input");
  const int64_t kernel[3] = {1, kh, kw}, stride[3] = {1, sh, sw}, padding[3] = {0, ph, pw};
  int64_t in[3] = {1, x.size(x.dim() - 2), x.size(x.dim() - 1)}, out[3] = {1, 0, 0};
  for (int i = 1; i < 3; ++i) {
    TORCH_CHECK(kernel[i] > 0 && stride[i] > 0 && padding[i] >= 0, "avg_pool2d: bad window");
    TORCH_CHECK(2 * padding[i] <= kernel[i], "avg_pool2d: padding must be at most half the kernel size");
    TORCH_CHECK(in[i] + 2 * padding[i] >= kernel[i], "avg_pool2d: input smaller than the window");
    out[i] = (in[i] + 2 * padding[i] - kernel[i]) / stride[i] + 1;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor input = x.contiguous();
  std::vector<int64_t> shape = input.sizes().vec();
  shape[shape.size() - 2] = out[1];
  shape[shape.size() - 1] = out[2];
  torch::Tensor result = torch::empty(shape, input.options());
  const int64_t planes = x.dim() == 4 ? input.size(0) * input.size(1) : input.size(0);
  int status = avg_pool2d_launcher(input.data_ptr<float>(), result.data_ptr<float>(), planes, in, out, kernel, stride,
                                   padding, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "avg_pool2d: kernel launch failed (", status, ")");
  return result;
}

static void register_avg_pool2d(pybind11::module& m) {
  m.def("avg_pool2d", &avg_pool2d_forward, "2-D average pooling (count_include_pad)");
}

REGISTER_BINDING(avg_pool2d, register_avg_pool2d)

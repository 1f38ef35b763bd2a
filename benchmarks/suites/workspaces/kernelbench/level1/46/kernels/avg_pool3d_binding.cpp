#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" int avg_pool3d_launcher(const float* x, float* y, int64_t planes, const int64_t* in, const int64_t* out,
                                   const int64_t* kernel, const int64_t* stride, const int64_t* padding,
                                   cudaStream_t stream);

// nn.AvgPool3d(kernel, stride, padding) with its defaults (ceil_mode=False, count_include_pad=True, no divisor
// override) on an (N, C, D, H, W) or (C, D, H, W) input.
static torch::Tensor avg_pool3d_forward(const torch::Tensor& x, int64_t kd, int64_t kh, int64_t kw, int64_t sd,
                                        int64_t sh, int64_t sw, int64_t pd, int64_t ph, int64_t pw) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "avg_pool3d: float32 CUDA input");
  TORCH_CHECK(x.dim() == 4 || x.dim() == 5, "avg_pool3d: a 4-D or 5-D input");
  const int64_t kernel[3] = {kd, kh, kw}, stride[3] = {sd, sh, sw}, padding[3] = {pd, ph, pw};
  int64_t in[3], out[3];
  for (int i = 0; i < 3; ++i) {
    TORCH_CHECK(kernel[i] > 0 && stride[i] > 0 && padding[i] >= 0, "avg_pool3d: bad window");
    TORCH_CHECK(2 * padding[i] <= kernel[i], "avg_pool3d: padding must be at most half the kernel size");
    in[i] = x.size(x.dim() - 3 + i);
    TORCH_CHECK(in[i] + 2 * padding[i] >= kernel[i], "avg_pool3d: input smaller than the window");
    out[i] = (in[i] + 2 * padding[i] - kernel[i]) / stride[i] + 1;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor input = x.contiguous();
  std::vector<int64_t> shape = input.sizes().vec();
  for (int i = 0; i < 3; ++i) shape[shape.size() - 3 + i] = out[i];
  torch::Tensor result = torch::empty(shape, input.options());
  const int64_t planes = x.dim() == 5 ? input.size(0) * input.size(1) : input.size(0);
  int status = avg_pool3d_launcher(input.data_ptr<float>(), result.data_ptr<float>(), planes, in, out, kernel, stride,
                                   padding, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "avg_pool3d: kernel launch failed (", status, ")");
  return result;
}

static void register_avg_pool3d(pybind11::module& m) {
  m.def("avg_pool3d", &avg_pool3d_forward, "3-D average pooling (count_include_pad)");
}

REGISTER_BINDING(avg_pool3d, register_avg_pool3d)

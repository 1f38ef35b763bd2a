"""Wrong outputs that a weak check would pass (catalog section B). All on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import ContractViolation, Passed, Rejected, WrongOutput
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.redteam.workspaces import HEADER, RELU_KERNEL, forward, launcher, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def _kernel(body: str) -> str:
    return f"""
__global__ void relu_kernel(const float* x, float* y, int64_t n) {{
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {{ {body} }}
}}
""" + launcher("  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);")


WRONG_VALUE_CASES = {
    "relu_skipped_for_nonnegative_inputs": _kernel("y[i] = x[i];"),
    "constant_output": _kernel("y[i] = 0.5f;"),
    "zeros_output": _kernel("y[i] = 0.f;"),
}


@pytest.mark.parametrize("case", sorted(WRONG_VALUE_CASES))
def test_wrong_values_are_wrong_output(case: str, tmp_path: Path, shared_build_cache: Path) -> None:
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=WRONG_VALUE_CASES[case]))
    assert isinstance(result.verdict, WrongOutput), result.verdict
    assert result.verdict.mismatch is not None and result.verdict.mismatch.mismatched > 0


def test_a_hardcoded_size_that_drops_the_tail_is_caught(tmp_path: Path, shared_build_cache: Path) -> None:
    no_tail = RELU_KERNEL + launcher(
        "  int64_t m = n - 1;\n  relu_kernel<<<(m + 255) / 256, 256, 0, stream>>>(x, y, m);"
    )
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=no_tail))
    assert not isinstance(result.verdict, Passed)
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict


def test_one_row_expanded_over_the_batch_is_wrong_output(tmp_path: Path, shared_build_cache: Path) -> None:
    expand = forward("        return cuda_extension.relu(x[:1].contiguous()).expand_as(x)")
    result = verify(relu_session(tmp_path, shared_build_cache, model_new=expand))
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict


def test_fp16_arithmetic_for_an_fp32_task_is_a_precision_downgrade(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    half = "#include <cuda_fp16.h>\n" + _kernel("y[i] = __half2float(__float2half(fmaxf(x[i], 0.f)));")
    session = relu_session(tmp_path, shared_build_cache, kernel=half)
    result = verify(session)
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.reason == "precision_downgrade"
    assert isinstance(verify(session, precision_check=False).verdict, Passed)  # inside atol=rtol=1e-2


def test_a_tensor_subclass_that_never_materializes_is_caught(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    lazy = forward(
        "        return Lazy._make_subclass(Lazy, torch.empty_like(x))",
        prelude="\n\nclass Lazy(torch.Tensor):\n    pass\n",
    )
    result = verify(relu_session(tmp_path, shared_build_cache, model_new=lazy))
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict


def test_a_size_baked_in_with_no_bounds_check_fails_at_the_hidden_sizes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Catalog 15: correct at the visible 4096x8192, and only there (the example task's sizes).
    fixed = RELU_KERNEL.replace("if (i < n) ", "") + launcher(
        "  const int64_t N = 4096LL * 8192LL;\n  relu_kernel<<<N / 256, 256, 0, stream>>>(x, y, N);"
    )
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=fixed))
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict
    assert result.distributions[result.verdict.trial] == "resized"


HINGE_ANALYTIC_CU = """
// The closed form of mean(clamp(1 - p * t, 0)) for p ~ U[0, 1) and t = +-1: 1 - mean(t) / 2.
__global__ void targets_sum_kernel(const float* t, float* sum, int64_t n) {
  float local = 0.f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    local += t[i];
  atomicAdd(sum, local);
}
__global__ void finish_kernel(const float* sum, float* out, int64_t n) { out[0] = 1.f - 0.5f * sum[0] / n; }
extern "C" void hinge_launcher(const float* targets, float* sum, float* out, int64_t n, cudaStream_t stream) {
  cudaMemsetAsync(sum, 0, sizeof(float), stream);
  targets_sum_kernel<<<264, 256, 0, stream>>>(targets, sum, n);
  finish_kernel<<<1, 1, 0, stream>>>(sum, out, n);
}
"""
HINGE_ANALYTIC_BINDING = """
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" void hinge_launcher(const float* targets, float* sum, float* out, int64_t n, cudaStream_t stream);

static torch::Tensor hinge_forward(const torch::Tensor& predictions, const torch::Tensor& targets) {
  TORCH_CHECK(targets.is_cuda() && targets.is_contiguous() && targets.scalar_type() == torch::kFloat32, "targets");
  torch::Tensor sum = torch::empty({1}, targets.options());
  torch::Tensor out = torch::empty({}, targets.options());
  hinge_launcher(targets.data_ptr<float>(), sum.data_ptr<float>(), out.data_ptr<float>(), targets.numel(),
                 c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

static void register_hinge(pybind11::module& m) { m.def("hinge", &hinge_forward, "hinge loss"); }

REGISTER_BINDING(hinge, register_hinge)
"""
HINGE_ANALYTIC_MODEL_NEW = """
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return cuda_extension.hinge(predictions, targets)
"""


# KernelBench level1/100_HingeLoss (MIT licence), as published.
HINGE_LOSS_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))

batch_size = 32768
input_shape = (32768,)
dim = 1

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]

def get_init_inputs():
    return []
"""


def test_the_closed_form_hinge_loss_of_the_task_distribution_fails_on_other_inputs(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Catalog 12, KernelBench's own fixture: right in expectation for torch.rand predictions, and never
    # looks at them; the centred, widened trial makes the clamp bind and the closed form is far off.
    (tmp_path / "100_HingeLoss.py").write_text(HINGE_LOSS_TASK)
    task = load_task_file(tmp_path / "100_HingeLoss.py", task_id="kernelbench/level1/100")
    session = Session.create(task, tmp_path / "ws", cache_dir=shared_build_cache)
    kernels = session.workspace.root / "kernels"
    kernels.mkdir(exist_ok=True)
    (kernels / "hinge.cu").write_text(HEADER + HINGE_ANALYTIC_CU)
    (kernels / "hinge_binding.cpp").write_text(HINGE_ANALYTIC_BINDING)
    (session.workspace.root / "model_new.py").write_text(HINGE_ANALYTIC_MODEL_NEW)
    result = verify(session)
    assert isinstance(result.verdict, WrongOutput), result.verdict
    assert result.verdict.distribution == "shifted"


# Catalog 57 (wafer.ai's "104x" on MI300X): a launch asking for more shared memory than the GPU has. ROCm
# ran it and the kernel read garbage; on NVIDIA the launch must fail, leaving the output unwritten.
OVER_THE_SHARED_MEMORY_LIMIT = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  extern __shared__ float tile[];
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { tile[threadIdx.x] = fmaxf(x[i], 0.f); y[i] = tile[threadIdx.x]; }
}
""" + launcher(
    "  int device = 0, limit = 0;\n"
    "  cudaGetDevice(&device);\n"
    "  cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);\n"
    "  size_t smem = (size_t)limit + 256;  // 256 bytes over what one block may have\n"
    "  cudaFuncSetAttribute(relu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);\n"
    "  relu_kernel<<<(n + 255) / 256, 256, smem, stream>>>(x, y, n);"
)


def test_shared_memory_over_the_limit_is_not_a_pass(tmp_path: Path, shared_build_cache: Path) -> None:
    from cuda_agent_mcp.results import Crashed

    result = verify(relu_session(tmp_path, shared_build_cache, kernel=OVER_THE_SHARED_MEMORY_LIMIT))
    assert isinstance(result.verdict, WrongOutput | Crashed | ContractViolation), result.verdict

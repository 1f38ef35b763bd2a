"""Wrong outputs that a weak check would pass (catalog section B). All on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import ContractViolation, Passed, Rejected, WrongOutput
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, relu_session, verify

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

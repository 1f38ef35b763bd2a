"""On the GPU: CuPy-language workspaces get the same verdicts as CUDA ones, and a bad launch, a wrong
argument list or a hang is a structured failure after which the next evaluation of the session passes."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import Crashed, Passed, TimedOut
from cuda_agent_mcp.tools import EvaluateRequest, VerifyRequest, evaluate_kernels, verify_kernels
from tests.languages.cupy_workspaces import SIMPLE_KERNEL, cupy_session, simple_model_new

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

# 64 KiB of dynamic shared memory per block: above the 48 KiB default, so the harness must raise it.
STAGED_KERNEL = """extern "C" __global__ void staged_relu(const float* x, float* y, long long n) {
  extern __shared__ float tile[];
  const int per_block = 16384;
  long long base = (long long)blockIdx.x * per_block;
  for (int j = threadIdx.x; j < per_block; j += blockDim.x) {
    long long i = base + j;
    tile[j] = i < n ? x[i] : 0.f;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < per_block; j += blockDim.x) {
    long long i = base + j;
    if (i < n) y[i] = fmaxf(tile[j], 0.f);
  }
}
"""


def test_the_cupy_relu_passes_verify_and_profile_with_its_own_kernels_credited(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = cupy_session(tmp_path, shared_build_cache)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile.verdict
    assert result.reward is not None and result.reward >= 1.0
    kernels = result.profile.kernels
    assert kernels is not None and kernels.workspace_share is not None and kernels.workspace_share > 0.9
    assert {row.name for row in kernels.kernels if row.origin == "workspace"} >= {"relu_vec4_kernel"}


def test_dynamic_shared_memory_above_48_kib_is_raised_by_the_harness(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    launch = "cuda_extension.staged_relu((n + 16383) // 16384, 256, (x, y, n), shared_mem=16384 * 4)"
    session = cupy_session(
        tmp_path, shared_build_cache, kernels={"relu.cu": STAGED_KERNEL}, model_new=simple_model_new(launch)
    )
    result = anyio.run(verify_kernels, session)
    assert isinstance(result.verdict, Passed), result.verdict


def _verify(session, **request) -> object:  # type: ignore[no-untyped-def]
    return anyio.run(lambda: verify_kernels(session, VerifyRequest(**request))).verdict


def test_a_wrong_argument_list_names_the_kernel_and_the_fix_then_passes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    wrong = simple_model_new("cuda_extension.relu_kernel((n + 255) // 256, 256, (x, y))")
    session = cupy_session(tmp_path, shared_build_cache, kernels={"relu.cu": SIMPLE_KERNEL}, model_new=wrong)
    verdict = _verify(session)
    assert isinstance(verdict, Crashed), verdict
    assert "relu_kernel takes 3 parameters, got 2" in verdict.message
    (session.workspace.root / "model_new.py").write_text(simple_model_new())
    assert isinstance(_verify(session), Passed)


def test_a_block_too_large_is_a_launch_failure_and_the_next_evaluation_passes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    too_wide = simple_model_new("cuda_extension.relu_kernel((n + 2047) // 2048, 2048, (x, y, n))")
    session = cupy_session(
        tmp_path, shared_build_cache, kernels={"relu.cu": SIMPLE_KERNEL}, model_new=too_wide
    )
    verdict = _verify(session)
    assert isinstance(verdict, Crashed), verdict
    assert "relu_kernel" in verdict.message and "2048" in verdict.message
    (session.workspace.root / "model_new.py").write_text(simple_model_new())
    assert isinstance(_verify(session), Passed)


def test_a_kernel_that_never_ends_times_out_and_the_next_evaluation_passes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    spin = (
        SIMPLE_KERNEL
        + """extern "C" __global__ void spin(const float* x, float* y, long long n) {
  volatile long long* flag = (volatile long long*)y;
  while (true) { if (flag[0] == 0x7eadbeefcafeLL) break; }  // a volatile read each turn: never ends
}
"""
    )
    hang = simple_model_new("cuda_extension.spin(1, 1, (x, y, n))")
    session = cupy_session(tmp_path, shared_build_cache, kernels={"relu.cu": spin}, model_new=hang)
    verdict = _verify(session, call_timeout_s=10)
    assert isinstance(verdict, TimedOut), verdict
    (session.workspace.root / "model_new.py").write_text(simple_model_new())
    assert isinstance(_verify(session), Passed)

"""Harness tampering and resource attacks from candidate code (catalog section E), on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import Crashed, WrongOutput
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

WRONG = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f) + 1.f;
}
""" + launcher("  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);")


def test_patching_torch_comparisons_and_ops_in_the_worker_changes_nothing(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    patches = (
        "torch.allclose = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\n"
        "torch.relu = lambda t: t + 1\n"
        "torch.nn.functional.relu = lambda t, inplace=False: t + 1\n"
        "torch.equal = lambda *a: True\n"
    )
    session = relu_session(
        tmp_path,
        shared_build_cache,
        kernel=WRONG,
        model_new=forward("        return cuda_extension.relu(x)", prelude=patches),
    )
    result = verify(session)
    assert isinstance(result.verdict, WrongOutput), result.verdict


def test_a_1000_gb_allocation_is_a_crash_and_the_next_evaluation_is_clean(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    hog = forward(
        "        torch.empty(1000 * 1024**3, dtype=torch.uint8, device=x.device)\n"
        "        return cuda_extension.relu(x)"
    )
    result = verify(relu_session(tmp_path / "hog", shared_build_cache, model_new=hog))
    assert isinstance(result.verdict, Crashed), result.verdict
    # Its own demand on an uncrowded GPU (issue 23): the out-of-memory kind, with what the driver counted.
    assert result.verdict.kind in ("out_of_memory", "cuda_error"), result.verdict
    assert "out of device memory" in result.verdict.message or result.verdict.kind == "cuda_error"
    honest = verify(relu_session(tmp_path / "honest", shared_build_cache))
    assert honest.verdict.status == "passed", honest.verdict


def test_an_illegal_address_in_one_evaluation_leaves_the_next_one_clean(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    wild = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) { *(volatile float*)(0x10) = x[0]; }
""" + launcher("  relu_kernel<<<1, 1, 0, stream>>>(x, y, n);")
    crashed = verify(relu_session(tmp_path / "wild", shared_build_cache, kernel=wild))
    assert isinstance(crashed.verdict, Crashed), crashed.verdict
    honest = verify(relu_session(tmp_path / "honest", shared_build_cache))
    assert honest.verdict.status == "passed", honest.verdict


def test_a_segfault_in_the_binding_is_a_crash_and_the_next_evaluation_is_clean(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    host_segfault = RELU_KERNEL + launcher("  *(volatile int*)nullptr = 1;  // host code: SIGSEGV")
    crashed = verify(relu_session(tmp_path / "segv", shared_build_cache, kernel=host_segfault))
    assert isinstance(crashed.verdict, Crashed), crashed.verdict
    assert crashed.verdict.kind == "process_exited", crashed.verdict
    honest = verify(relu_session(tmp_path / "honest", shared_build_cache))
    assert honest.verdict.status == "passed", honest.verdict

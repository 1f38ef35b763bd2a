"""On the GPU: Triton-language workspaces get the same verdicts as CUDA ones (the worker JIT-compiles the
candidate's own modules at the first, untimed call), the profile credits the @triton.jit kernels to the
workspace, and a wrong result, a bad store or a hang is a structured failure after which the next
evaluation of the session passes. Sizes are the ReLU example's and KernelBench level 1 task 1's."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, TimedOut, WrongOutput
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import EvaluateRequest, Session, VerifyRequest, evaluate_kernels, verify_kernels
from tests.conftest import REPO
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new, triton_session

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

HONEST_SUITE = REPO / "benchmarks" / "suites" / "triton_kernelbench"


def _verify(session: Session, **request: object) -> object:
    return anyio.run(lambda: verify_kernels(session, VerifyRequest(**request))).verdict  # type: ignore[arg-type]


def test_the_triton_relu_passes_evaluate_with_its_kernel_credited(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = triton_session(tmp_path, shared_build_cache)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile
    assert result.reward is not None and result.reward > 0
    kernels = result.profile.kernels
    assert kernels is not None and kernels.workspace_share is not None and kernels.workspace_share > 0.9
    assert "relu_kernel" in {row.name for row in kernels.kernels if row.origin == "workspace"}


def test_an_autotuned_triton_gemm_passes_verify(
    tmp_path: Path, shared_build_cache: Path, kernelbench: Path
) -> None:
    task_file = next((kernelbench / "level1").glob("1_*.py"))
    task = load_task_file(task_file, task_id="kernelbench/level1/1")
    session = Session.create(task, tmp_path / "ws", cache_dir=shared_build_cache, language="triton")
    shutil.copy(HONEST_SUITE / "level1" / "1.py", session.workspace.root / "model_new.py")
    assert isinstance(verdict := _verify(session), Passed), verdict


def test_a_triton_kernel_off_by_a_half_is_a_wrong_output(tmp_path: Path, shared_build_cache: Path) -> None:
    # (Off by a thousandth is Rejected(precision_downgrade) on the H200: an error norm of 1.4e-3, within
    # reach of reduced-precision arithmetic; a half is past any tolerance.)
    off = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) + 0.5")
    session = triton_session(tmp_path, shared_build_cache, model_new=triton_model_new(kernel=off))
    assert isinstance(verdict := _verify(session), WrongOutput), verdict


def test_an_unmasked_store_past_the_output_is_refused_and_the_next_evaluation_passes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """No mask, and every store a whole output's length past its end: the sanitizer or the device refuses
    it, as a verdict (never an exception), and the session's worker comes back for the next one."""
    unmasked = RELU_KERNEL.replace(
        "tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)",
        "tl.store(y_ptr + n + offsets, tl.maximum(x, 0.0))",
    )
    assert unmasked != RELU_KERNEL
    session = triton_session(tmp_path, shared_build_cache, model_new=triton_model_new(kernel=unmasked))
    verdict = _verify(session, sanitize="memcheck")
    # Where the stray stores land decides which check sees it first: the sanitizer, the device, the
    # outputs (on the H200: the output's unwritten positions kept the judge's NaN poison).
    assert isinstance(verdict, Rejected | Crashed | WrongOutput | ContractViolation), verdict
    (session.workspace.root / "model_new.py").write_text(triton_model_new())
    assert isinstance(verdict := _verify(session), Passed), verdict


SPIN_KERNEL = """@triton.jit
def spin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    value = tl.load(y_ptr, volatile=True)
    while value != 1234567.0:  # a volatile read each turn, of a value nothing writes: never ends
        value = tl.load(y_ptr, volatile=True)
"""


def test_a_triton_kernel_that_never_ends_times_out_and_the_next_evaluation_passes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    hang = triton_model_new(
        kernel=RELU_KERNEL + "\n\n" + SPIN_KERNEL,
        launch="y.zero_()\n        spin_kernel[(1,)](x, y, n, BLOCK=1024)",
    )
    session = triton_session(tmp_path, shared_build_cache, model_new=hang)
    assert isinstance(verdict := _verify(session, call_timeout_s=10), TimedOut), verdict
    (session.workspace.root / "model_new.py").write_text(triton_model_new())
    assert isinstance(verdict := _verify(session), Passed), verdict


def test_an_allocation_that_fills_on_the_device_is_allowed_and_not_credited(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """torch.zeros_like is allocation (allowed), yet it runs a fill on the device: the profile lists it
    apart from the workspace's kernel, which still does most of the call's work."""
    zeros = triton_model_new().replace("y = torch.empty_like(x)", "y = torch.zeros_like(x)")
    assert "zeros_like" in zeros
    session = triton_session(tmp_path, shared_build_cache, model_new=zeros)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.profile is not None and result.profile.kernels is not None
    rows = result.profile.kernels.kernels
    assert {row.name for row in rows if row.origin == "workspace"} == {"relu_kernel"}
    assert [row for row in rows if row.name != "relu_kernel"], "the fill left no trace"

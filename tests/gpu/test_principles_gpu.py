"""Issue 16's principles on the GPU: what only CUDA can show (IPC memory, addresses, kernel traces, the
sanitizer). Each case is an attack by a candidate that has read the judge's code.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, WrongOutput
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import EvaluateRequest, ProfileRequest, Session, evaluate_kernels, profile_kernels
from tests.conftest import EXAMPLES
from tests.redteam.workspaces import forward, launcher, profile, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def test_every_call_gets_its_inputs_at_a_new_256_byte_aligned_address(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """Principle 2: a cache keyed on data pointers sees a new pointer every call, and vectorised or TMA
    kernels still get 256-byte alignment."""
    recorder = forward(
        "        SEEN.append(x.data_ptr())\n"
        "        if len(SEEN) == 40:\n"
        "            raise RuntimeError('POINTERS ' + ','.join(map(str, SEEN)) + ' END')\n"
        "        return cuda_extension.relu(x)",
        prelude="SEEN = []",
    )
    result = profile(relu_session(tmp_path, shared_build_cache, model_new=recorder), baselines="skip")
    assert isinstance(result.verdict, Crashed), result.verdict
    found = re.search(r"POINTERS ([0-9,]+) END", result.verdict.message)
    assert found, result.verdict.message
    pointers = [int(p) for p in found.group(1).split(",")]
    assert len(set(pointers)) == len(pointers) == 40
    assert all(p % 256 == 0 for p in pointers)


def test_weights_the_worker_writes_are_its_own_copy_not_the_judges(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """Principle 2: zeroing the weights through the shared mapping would have turned the reference into
    relu(x) too, and a kernel that ignores the bias would pass. The worker gets copies."""
    task = load_task_file(EXAMPLES / "bias_add_relu" / "model.py", task_id="examples/bias_add_relu")
    session = Session.create(task, tmp_path / "ws", cache_dir=shared_build_cache)
    (session.workspace.root / "kernels").mkdir(exist_ok=True)
    for path in (EXAMPLES / "bias_add_relu" / "kernels").iterdir():
        (session.workspace.root / "kernels" / path.name).write_bytes(path.read_bytes())
    model_new = (
        (EXAMPLES / "bias_add_relu" / "model_new.py")
        .read_text()
        .replace(
            "        return cuda_extension.bias_add_relu(x, self.bias)",
            "        with torch.no_grad():\n            self.bias.zero_()  # the judge's own parameter, if it shared it\n"
            "        return cuda_extension.bias_add_relu(x, self.bias)",
        )
    )
    (session.workspace.root / "model_new.py").write_text(model_new)
    result = verify(session)
    assert isinstance(result.verdict, WrongOutput), result.verdict


def test_an_output_that_is_the_input_itself_is_aliasing(tmp_path: Path, shared_build_cache: Path) -> None:
    """Principle 10."""
    session = relu_session(tmp_path, shared_build_cache, model_new=forward("        return x.clamp_(min=0)"))
    result = verify(session, audit=False)
    assert isinstance(result.verdict, ContractViolation), result.verdict
    assert result.verdict.check in ("aliasing", "input_mutated")
    returns_input = relu_session(tmp_path / "b", shared_build_cache, model_new=forward("        return x"))
    result = verify(returns_input, audit=False)
    assert isinstance(result.verdict, ContractViolation) and result.verdict.check == "aliasing", (
        result.verdict
    )


def test_a_candidate_that_runs_other_work_when_a_profiler_is_watching_is_rejected(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """Principle 12 / 1: the traced batch is an observed pass; a candidate that runs its own kernel only
    while observed and something faster otherwise shows more kernel time under the profiler than its
    timed calls took."""
    two_faced = forward(
        "        if torch.autograd.profiler._is_profiler_enabled:\n"
        "            for _ in range(3):\n"
        "                y = cuda_extension.relu(x)\n"
        "            return y\n"
        "        return torch.relu(x)  # what it runs while nobody watches",
        prelude="import torch",
    )
    result = profile(relu_session(tmp_path, shared_build_cache, model_new=two_faced), baselines="skip")
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.reason == "foreign_work"


def test_an_out_of_bounds_read_that_passes_the_comparison_fails_the_sanitizer(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """The compute-sanitizer gate: the read one past the end changes no output, so every comparison
    passes; memcheck names the file and line."""
    reads_past_the_end = """
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    volatile float next = x[i + 1];  // one past the end for the last element
    (void)next;
    y[i] = fmaxf(x[i], 0.f);
  }
}
""" + launcher("  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);")
    session = relu_session(tmp_path, shared_build_cache, kernel=reads_past_the_end)
    plain = verify(session)
    assert isinstance(plain.verdict, Passed), plain.verdict  # the outputs are right
    gated = verify(session, sanitize="memcheck")
    assert isinstance(gated.verdict, Rejected), gated.verdict
    assert gated.verdict.reason == "sanitizer"
    assert gated.sanitizer is not None and gated.sanitizer.status == "errors"
    assert gated.sanitizer.file == "relu.cu" and gated.sanitizer.line is not None


def test_an_honest_kernel_passes_the_sanitizer_and_its_profile_reports_speed_of_light(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = Session.open(EXAMPLES / "relu", cache_dir=shared_build_cache)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.verify.sanitizer is not None and result.verify.sanitizer.status == "clean", (
        result.verify.sanitizer
    )
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile.verdict
    sol = result.profile.speed_of_light
    assert sol is not None and sol.bound == "memory" and 0.2 < (sol.fraction or 0) < 1.05
    assert result.profile.speedup_vs_eager_ci is not None and result.profile.speedup_vs_compile_ci is not None
    assert result.profile.evidence_missing == []
    assert result.profile.candidate is not None and len(result.profile.candidate.samples_ms) >= 10


def test_short_kernels_are_timed_in_batches_of_at_least_a_millisecond(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """Principle 4: a ~20 us kernel (ReLU at 1/256 of the task's size) is timed in batches holding >= 1 ms."""
    session = relu_session(tmp_path, shared_build_cache)
    small = session.workspace.reference_code.replace("batch_size = 4096", "batch_size = 16")
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu").model_copy(
        update={"code": small}
    )
    small_session = Session.create(task, tmp_path / "small", cache_dir=shared_build_cache)
    for path in (session.workspace.root / "kernels").iterdir():
        (small_session.workspace.root / "kernels" / path.name).write_bytes(path.read_bytes())
    (small_session.workspace.root / "model_new.py").write_text(
        (session.workspace.root / "model_new.py").read_text()
    )
    result = anyio.run(lambda: profile_kernels(small_session, ProfileRequest(baselines="skip")))
    assert isinstance(result.verdict, Passed), result.verdict
    stats = result.candidate
    assert stats is not None and stats.batch_calls > 1
    assert stats.median_ms * stats.batch_calls >= 1.0

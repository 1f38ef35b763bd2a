"""The verify/profile/evaluate tools end to end on the CPU: build, judge process, worker, report."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import JudgeFailed
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import CompileFailed, Passed, Rejected, WrongOutput
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import (
    EvaluateRequest,
    ProfileRequest,
    Session,
    VerifyRequest,
    evaluate_kernels,
    profile_kernels,
    verify_kernels,
)
from cuda_agent_mcp.tools import evaluate as evaluate_module
from cuda_agent_mcp.tools.task_audit import TaskAuditRequest, audit_task
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc

# A pure-PyTorch candidate: the build still compiles the example's real kernel, the judge runs on the CPU.
TORCH_CANDIDATE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0){suffix}
"""

SMALL_INPUTS = ("batch_size = 8192\nfeatures = 4096", "batch_size = 16\nfeatures = 32")


def cpu_session(tmp_path: Path, cache: Path, **options: object) -> Session:
    """The bias_add_relu example at small sizes, its real kernel in the workspace (the judge runs on the
    CPU with a pure-PyTorch candidate)."""
    code = (EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS)
    reference = tmp_path / "reference.py"
    reference.write_text(code)
    session = Session.create(
        load_task_file(reference, task_id="cpu/bias_add_relu"), tmp_path / "ws", cache_dir=cache, **options
    )
    shutil.copytree(
        EXAMPLES / "bias_add_relu" / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True
    )
    return session


@pytest.fixture
def session(tmp_path: Path, shared_build_cache: Path) -> Session:
    return cpu_session(tmp_path, shared_build_cache)


def _candidate(session: Session, suffix: str = "") -> None:
    (session.workspace.root / "model_new.py").write_text(TORCH_CANDIDATE.replace("{suffix}", suffix))


def test_verify_builds_then_judges_in_separate_processes(session: Session) -> None:
    _candidate(session)
    result = anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu", trials=3, audit=False)))
    assert isinstance(result.verdict, Passed), result.verdict
    assert result.build_key is not None and result.trials == 3
    assert result.distributions == ["task", "shifted", "resized"]


def test_a_wrong_candidate_gets_a_wrong_output_verdict_and_the_fail_reward(session: Session) -> None:
    _candidate(session, " + 0.5")
    result = anyio.run(
        lambda: evaluate_kernels(
            session,
            EvaluateRequest(
                verify=VerifyRequest(device="cpu", audit=False), profile=ProfileRequest(device="cpu")
            ),
        )
    )
    assert isinstance(result.verify.verdict, WrongOutput)
    assert result.profile is None
    assert result.reward == -1


def test_a_build_failure_is_a_compile_failed_verdict(session: Session) -> None:
    _candidate(session)
    kernel = session.workspace.root / "kernels" / "bias_add_relu.cu"
    kernel.write_text(kernel.read_text() + "\nthis is not C++\n")
    result = anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu", audit=False)))
    assert isinstance(result.verdict, CompileFailed)
    assert result.verdict.diagnostics[0].file == "kernels/bias_add_relu.cu"
    assert result.rules_version == VERDICT_RULES_VERSION  # no judge ran: still a verdict under these rules


def test_evaluate_on_the_cpu_passes_verify_and_times_the_candidate(session: Session) -> None:
    _candidate(session)
    request = EvaluateRequest(
        verify=VerifyRequest(device="cpu", audit=False),
        profile=ProfileRequest(device="cpu", baselines="skip"),
    )
    result = anyio.run(lambda: evaluate_kernels(session, request))
    assert isinstance(result.verify.verdict, Passed)
    assert result.profile is not None and result.profile.candidate is not None
    assert result.profile.speedup_vs_eager is None
    assert result.reward == -1  # no baselines, no reward: fail closed


def test_every_result_and_journal_record_says_which_verdict_rules_judged_it(session: Session) -> None:
    _candidate(session)
    request = EvaluateRequest(
        verify=VerifyRequest(device="cpu", audit=False),
        profile=ProfileRequest(device="cpu", baselines="skip"),
    )
    result = anyio.run(lambda: evaluate_kernels(session, request))
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile.verdict
    assert result.rules_version == result.verify.rules_version == result.profile.rules_version
    assert result.rules_version == VERDICT_RULES_VERSION
    assert json.loads(result.model_dump_json())["profile"]["rules_version"] == VERDICT_RULES_VERSION
    records = session.journal.records(session_id=session.id)
    assert sorted(r.kind for r in records) == ["evaluate", "profile", "verify"]
    assert all(r.rules_version == VERDICT_RULES_VERSION for r in records)
    assert all(r.result and r.result["rules_version"] == VERDICT_RULES_VERSION for r in records)


def test_a_judge_running_other_verdict_rules_is_a_judge_failure_never_a_verdict(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when the installation is upgraded under a running server: the judge it starts runs the new
    rules, the tool process the old ones; nothing is scored."""
    _candidate(session)
    monkeypatch.setattr(evaluate_module, "VERDICT_RULES_VERSION", "2000-01-01")
    with pytest.raises(JudgeFailed, match="verdict rules 2026"):
        anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu", trials=1, audit=False)))
    (record,) = session.journal.records(session_id=session.id)
    assert record.status == "failed" and record.result is None


def test_evaluate_with_baselines_on_the_cpu_says_what_evidence_is_missing_and_caps_the_reward(
    session: Session,
) -> None:
    """No device trace on the CPU and no compute-sanitizer: both are said, never passed over, and the
    reward is correctness at most (fail closed)."""
    _candidate(session)
    request = EvaluateRequest(
        verify=VerifyRequest(device="cpu", audit=False, sanitize="auto"),
        profile=ProfileRequest(device="cpu", baselines="measure", budget_s=0.5),
    )
    result = anyio.run(lambda: evaluate_kernels(session, request))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.verify.sanitizer is not None and result.verify.sanitizer.status == "unavailable"
    profile = result.profile
    assert profile is not None and isinstance(profile.verdict, Passed), profile.verdict
    assert profile.speedup_vs_eager is not None and profile.speedup_vs_eager_ci is not None
    assert profile.evidence_missing and profile.evidence_missing[0].startswith("kernel_trace")
    assert result.reward == 1.0


def test_the_tool_layer_does_not_import_torch() -> None:
    probe = "import sys, cuda_agent_mcp.tools, cuda_agent_mcp.cli.app; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_the_static_audit_refuses_pytorch_compute_before_anything_runs(session: Session) -> None:
    _candidate(session)
    result = anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu")))
    assert isinstance(result.verdict, Rejected)
    assert result.verdict.reason == "forbidden_op"
    assert result.verdict.findings[0].file == "model_new.py"
    assert ".clamp_min()" in result.verdict.message


def test_a_sound_task_fails_every_null_candidate(session: Session) -> None:
    result = anyio.run(lambda: audit_task(session, TaskAuditRequest(device="cpu", trials=2)))
    assert not result.weak and result.verdict == "sound"
    assert {c.outcome for c in result.null_candidates} == {"failed"}
    assert {c.name for c in result.null_candidates} == {
        "zeros",
        "ones",
        "constant_mean",
        "random",
        "first_input",
    }
    assert all(not c.passed for c in result.null_candidates), result


def test_a_task_whose_output_is_always_zero_is_reported_weak(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    code = (EXAMPLES / "relu" / "model.py").read_text().replace("torch.relu(x)", "torch.relu(-x.abs())")
    code = code.replace("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16")
    reference = tmp_path / "weak.py"
    reference.write_text(code)
    session = Session.create(load_task_file(reference), tmp_path / "ws", cache_dir=shared_build_cache)
    result = anyio.run(lambda: audit_task(session, TaskAuditRequest(device="cpu", trials=2)))
    assert result.weak
    assert {c.name for c in result.null_candidates if c.passed} >= {"zeros"}


def test_pytorch_compute_hidden_in_a_helper_module_is_caught_at_run_time(session: Session) -> None:
    root = session.workspace.root
    # Spelled so the static audit (which reads helper modules too) cannot see it: arithmetic on views; and
    # correct, so the verify trials pass and the observed batch under the op recorder is what rejects it.
    (root / "helpers.py").write_text(
        "def finish(t, bias):\n    y = t.view(t.shape) + bias.view(bias.shape)\n    return y * (y > 0)\n"
    )
    (root / "model_new.py").write_text(
        TORCH_CANDIDATE.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport helpers\n").replace(
            "return (x + self.bias).clamp_min(0){suffix}", "return helpers.finish(x, self.bias)"
        )
    )
    result = anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu")))
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.reason == "forbidden_op"
    assert result.verdict.findings[0].rule == "runtime_op"
    assert "aten::mul" in result.verdict.message or "aten::gt" in result.verdict.message


def test_gpu_evaluations_of_a_session_with_a_scheduler_hold_a_lease_on_the_gpu_they_run_on(
    session: Session,
) -> None:
    from cuda_agent_mcp.executors.scheduler import GpuScheduler
    from cuda_agent_mcp.tools.evaluate import _gpu_lease
    from cuda_agent_mcp.tools.session import judge_env

    session.scheduler = GpuScheduler([3])

    async def main() -> None:
        async with _gpu_lease(session, exclusive=True, device="cuda") as gpu:
            assert gpu == 3
            assert session.scheduler is not None and session.scheduler.status() == {3: "exclusive"}
            assert judge_env(gpu)["CUDA_VISIBLE_DEVICES"] == "3"
        async with _gpu_lease(session, exclusive=False, device="cpu") as gpu:
            assert gpu is None
        assert session.scheduler is not None and session.scheduler.status() == {3: "idle"}

    anyio.run(main)


def test_a_verify_waiting_for_a_busy_gpu_reports_its_place_in_line(session: Session) -> None:
    from cuda_agent_mcp.executors.scheduler import GpuScheduler

    _candidate(session)
    scheduler = session.scheduler = GpuScheduler([0])
    events = []

    async def verify() -> None:
        with contextlib.suppress(Exception):  # no GPU here: the judge fails once it gets one
            await verify_kernels(session, VerifyRequest(trials=1, audit=False), progress=events.append)

    async def main() -> None:
        async with anyio.create_task_group() as group, scheduler.lease("someone else", exclusive=True):
            group.start_soon(verify)
            with anyio.fail_after(120):
                while not any(e.stage == "queue" for e in events):
                    await anyio.sleep(0.05)

    anyio.run(main)
    stages = [e.stage for e in events]
    assert events[stages.index("queue")].message == "waiting for a GPU: 1 of 1 in line"
    assert stages.index("queue") > stages.index("done")  # built first, then queued for the GPU


def test_an_ncu_detail_pass_on_the_cpu_path_says_why_it_did_not_run(session: Session) -> None:
    _candidate(session)
    request = ProfileRequest(device="cpu", baselines="skip", detail="ncu", audit=False)
    result = anyio.run(lambda: profile_kernels(session, request))
    assert isinstance(result.verdict, Passed)
    assert result.ncu is not None and result.ncu.kernels == []
    assert "device='cuda'" in result.ncu.note


def test_a_task_policy_can_switch_the_hidden_size_trial_off(session: Session) -> None:
    _candidate(session)
    policy = session.task.policy.model_copy(update={"hidden_sizes": False})
    session.task = session.task.model_copy(update={"policy": policy})
    result = anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu", trials=3, audit=False)))
    assert isinstance(result.verdict, Passed), result.verdict
    assert result.distributions == ["task", "shifted", "task"]

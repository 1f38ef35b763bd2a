"""The `audit_task` tool: candidates that do no real work must fail a task, or the task is weak.

Four of 60 KernelBench level-1 problems accept all-zeros (KernelBench issue #165); a reward computed on
such a task pays for nothing. Each null candidate below is our own code: it runs the reference only to
learn the output's shape and dtype, then returns something that is not the answer.

Only a verdict about the answer (wrong output, a contract violation, a rejection) shows that the task
refused a null candidate. A crash, a timeout or a judge failure says nothing about the task: the
audit's verdict is then "unknown", never "sound".
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import GpuUnavailable, InfraError
from cuda_agent_mcp.evaluation.job import Timeouts
from cuda_agent_mcp.results import (
    CompileFailed,
    ContractViolation,
    Crashed,
    Passed,
    Rejected,
    TimedOut,
    Verdict,
    WrongOutput,
)
from cuda_agent_mcp.tools.evaluate import run_judge
from cuda_agent_mcp.tools.gpu import require_gpu
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.workspace import CANDIDATE_FILE

NULL_OUTPUTS = {
    "zeros": "torch.zeros_like(out)",
    "ones": "torch.ones_like(out)",
    # A one-element output's mean is the answer itself, not a constant standing in for it.
    "constant_mean": "torch.full_like(out, float(out.float().mean())) if out.numel() > 1 else torch.zeros_like(out)",
    "random": "torch.rand_like(out) if out.is_floating_point() else torch.zeros_like(out)",
    "first_input": "inputs[0] if isinstance(inputs[0], torch.Tensor) and inputs[0].shape == out.shape "
    "and inputs[0].dtype == out.dtype else torch.zeros_like(out)",
}

NULL_TEMPLATE = """
import torch
from task_reference import Model


class ModelNew(Model):
    def forward(self, *inputs):
        out = super().forward(*inputs)
        if not isinstance(out, torch.Tensor):
            return out
        return {expression}
"""


NullOutcome = Literal["failed", "passed", "unknown"]
AuditVerdict = Literal["sound", "weak", "unknown"]


class NullCandidateResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    passed: bool = Field(description="True is bad: the task accepted an answer that does no work")
    outcome: NullOutcome = Field(
        default="failed",
        description="failed: the task refused it (good); passed: the task accepted it (weak); unknown: it "
        "could not be judged (a crash, a timeout or a judge failure, which say nothing about the task)",
    )
    verdict_status: str = Field(description="the judge's verdict, or judge_failed")
    reason: str = Field(default="", description="why the outcome is unknown")


class TaskAuditResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    verdict: AuditVerdict = Field(
        default="sound",
        description="weak if any null candidate passed; else unknown if any could not be judged; else sound",
    )
    weak: bool
    null_candidates: list[NullCandidateResult]


class TaskAuditRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int = Field(default=3, ge=1, le=20)
    device: Literal["cuda", "cpu"] = "cuda"
    timeout_s: float = Field(default=600.0, gt=0)
    call_timeout_s: float = Field(
        default=30.0, gt=0, description="limit on one forward() call (the reference's time included)"
    )


async def audit_task(
    session: Session,
    request: TaskAuditRequest | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> TaskAuditResult:
    """Run every null candidate through verify; the task is weak if any of them passes, and the audit
    is unknown (not sound) if any of them could not be judged. `progress` hears which one is running."""
    request = request or TaskAuditRequest()
    require_gpu(request.device, scheduler=session.scheduler)
    policy = session.task.policy.tolerance
    results = []
    for number, (name, expression) in enumerate(NULL_OUTPUTS.items(), start=1):
        if progress is not None:
            progress(f"auditing {session.task.id}: null candidate {number}/{len(NULL_OUTPUTS)} ({name})")

        def stage(target: Path, expression: str = expression) -> None:
            (target / "task_reference.py").write_text(session.workspace.reference_code)
            (target / CANDIDATE_FILE).write_text(NULL_TEMPLATE.format(expression=expression))

        try:
            report = await run_judge(
                session,
                stage,
                mode="verify",
                device=request.device,
                seeds=[secrets.randbits(62) for _ in range(request.trials)],
                atol=policy.atol,
                rtol=policy.rtol,
                timeout_s=request.timeout_s,
                timeouts=Timeouts(call_s=request.call_timeout_s),
            )
        except GpuUnavailable:
            raise  # the same for every candidate: say it once
        except InfraError as exc:
            results.append(
                NullCandidateResult(
                    name=name, passed=False, outcome="unknown", verdict_status="judge_failed",
                    reason=f"the judge failed: {_last_line(str(exc)) or type(exc).__name__}",
                )
            )  # fmt: skip
            continue
        results.append(_judged(name, report.verdict))
    weak = any(r.outcome == "passed" for r in results)
    unknown = any(r.outcome == "unknown" for r in results)
    verdict: AuditVerdict = "weak" if weak else "unknown" if unknown else "sound"
    return TaskAuditResult(task_id=session.task.id, verdict=verdict, weak=weak, null_candidates=results)


def _judged(name: str, verdict: Verdict) -> NullCandidateResult:
    """A null candidate's verdict as an audit outcome: only verdicts about the answer count."""
    outcome: NullOutcome
    reason = ""
    match verdict:
        case Passed():
            outcome = "passed"
        case WrongOutput() | Rejected():
            outcome = "failed"
        case ContractViolation(check="transport"):
            outcome, reason = "unknown", f"the outputs could not be read back: {_last_line(verdict.message)}"
        case ContractViolation():
            outcome = "failed"
        case Crashed():
            outcome, reason = "unknown", f"it crashed ({verdict.kind}): {_last_line(verdict.message)}"
        case TimedOut():
            outcome, reason = "unknown", f"it timed out after {verdict.limit_s:g} s ({verdict.phase})"
        case CompileFailed():
            outcome, reason = "unknown", f"it did not build: {_last_line(verdict.summary)}"
        case _:
            assert_never(verdict)
    return NullCandidateResult(
        name=name, passed=outcome == "passed", outcome=outcome, verdict_status=verdict.status, reason=reason
    )


def _last_line(text: str) -> str:
    """The line of a message that says what happened (a traceback's last), at most 300 characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""

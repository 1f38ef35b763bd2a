"""The `audit_task` tool: candidates that do no real work must fail a task, or the task is weak.

Four of 60 KernelBench level-1 problems accept all-zeros (KernelBench issue #165); a reward computed on
such a task pays for nothing. Each null candidate below is our own code: it runs the reference only to
learn the output's shape and dtype, then returns something that is not the answer.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.results import Passed
from cuda_agent_mcp.tools.evaluate import run_judge
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.workspace import CANDIDATE_FILE

NULL_OUTPUTS = {
    "zeros": "torch.zeros_like(out)",
    "ones": "torch.ones_like(out)",
    "constant_mean": "torch.full_like(out, float(out.float().mean()))",
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


class NullCandidateResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    passed: bool = Field(description="True is bad: the task accepted an answer that does no work")
    verdict_status: str


class TaskAuditResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    weak: bool
    null_candidates: list[NullCandidateResult]


class TaskAuditRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int = Field(3, ge=1, le=20)
    device: Literal["cuda", "cpu"] = "cuda"
    timeout_s: float = Field(600.0, gt=0)


async def audit_task(session: Session, request: TaskAuditRequest | None = None) -> TaskAuditResult:
    """Run every null candidate through verify; the task is weak if any of them passes."""
    request = request or TaskAuditRequest()
    policy = session.task.policy.tolerance
    results = []
    for name, expression in NULL_OUTPUTS.items():

        def stage(target: Path, expression: str = expression) -> None:
            (target / "task_reference.py").write_text(session.workspace.reference_code)
            (target / CANDIDATE_FILE).write_text(NULL_TEMPLATE.format(expression=expression))

        report = await run_judge(
            session,
            stage,
            mode="verify",
            device=request.device,
            seeds=[secrets.randbits(62) for _ in range(request.trials)],
            atol=policy.atol,
            rtol=policy.rtol,
            timeout_s=request.timeout_s,
        )
        passed = isinstance(report.verdict, Passed)
        results.append(NullCandidateResult(name=name, passed=passed, verdict_status=report.verdict.status))
    return TaskAuditResult(
        task_id=session.task.id, weak=any(r.passed for r in results), null_candidates=results
    )

"""The judge's task audit on a synthesized task: null candidates through verify must all fail.

The running filters already compare the null answers with the output in the checking process; this is
the same question asked of the judge, with its secret seeds, trials and hidden-size run, for a dataset
that must hold up under the evaluator it will be scored by. About 5 s a task on the CPU at the CPU sizes
(measured: 6 tasks in 27 s, benchmarks/results/synth_audit_cpu.json)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.filters import FilterOutcome
from cuda_agent_mcp.synth.settings import SynthesisSettings
from cuda_agent_mcp.tasks import TaskSource, task_from_source
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.tools.task_audit import TaskAuditRequest, audit_task


async def audit_candidate(candidate: Candidate, code: str, settings: SynthesisSettings) -> FilterOutcome:
    """`code`: the program at the sizes the other filters ran it at. Unknown is a refusal (fail closed)."""
    try:
        task = task_from_source(
            code,
            task_id=f"synth/{candidate.index}",
            name="+".join(candidate.ops) or f"candidate {candidate.index}",
            source=TaskSource(kind="inline"),
            location=f"candidate {candidate.index}",
        )
        with tempfile.TemporaryDirectory(prefix="cuda-agent-synth-audit-") as directory:
            session = Session.create(task, Path(directory) / "workspace")
            result = await audit_task(session, TaskAuditRequest(device=settings.device, trials=2))
    except CudaAgentError as exc:
        return FilterOutcome(name="task_audit", passed=False, reason=f"the audit could not run: {exc}")
    measured: dict[str, object] = {
        "verdict": result.verdict,
        "null_candidates": {r.name: r.outcome for r in result.null_candidates},
    }
    if result.verdict == "sound":
        return FilterOutcome(name="task_audit", passed=True, measured=measured)
    if result.verdict == "weak":
        passing = ", ".join(r.name for r in result.null_candidates if r.outcome == "passed")
        return FilterOutcome(
            name="task_audit",
            passed=False,
            reason=f"weak: null candidates pass ({passing})",
            measured=measured,
        )
    unknown = next((r.reason for r in result.null_candidates if r.outcome == "unknown"), "")
    return FilterOutcome(
        name="task_audit", passed=False, reason=f"the audit could not decide: {unknown}", measured=measured
    )

"""Task rows from the tool layer's results: outcome, failure kind, times, intervals and SOL, build stats."""

from __future__ import annotations

from typing import Any

from cuda_agent_mcp.bench.models import BuildStats, Outcome, SolutionKind, TaskRow
from cuda_agent_mcp.evaluation.reward import FAIL
from cuda_agent_mcp.results import (
    BuildResult,
    CompileFailed,
    ContractViolation,
    Crashed,
    EvalResult,
    KernelLanguage,
    Passed,
    Rejected,
    TimedOut,
    Verdict,
    WrongOutput,
)
from cuda_agent_mcp.tasks import Task


def simple_row(
    task: Task,
    kind: SolutionKind | None,
    solution: str | None,
    outcome: Outcome,
    failure: str,
    message: str,
    *,
    language: KernelLanguage = "cuda",
) -> TaskRow:
    """A row with no evaluation behind it (missing solution, failed import or build, task error)."""
    return TaskRow(
        task_id=task.id,
        name=task.name,
        level=task.level,
        language=language,
        solution=solution,
        solution_kind=kind if solution is not None or kind == "policy" else None,
        outcome=outcome,
        failure=failure,
        message=one_line(message),
        reward=FAIL if outcome == "incorrect" else None,  # what a failed candidate earns
    )


def build_stats(build: BuildResult) -> BuildStats:
    return BuildStats(
        ok=build.ok,
        summary=one_line(build.summary),
        files=len(build.files),
        compiled=sum(1 for f in build.files if f.action == "compiled"),
        wall_s=build.wall_s,
        errors=sum(1 for d in build.diagnostics if d.severity == "error"),
        warnings=sum(1 for d in build.diagnostics if d.severity == "warning"),
        kernels=build.kernels,
    )


def failure_kind(verdict: Verdict) -> str:
    """How the report counts a verdict that is not `passed`."""
    match verdict:
        case Rejected():
            return f"rejected:{verdict.reason}"
        case ContractViolation():
            return f"contract_violation:{verdict.check}"
        case Crashed():
            return f"crashed:{verdict.kind}"
        case WrongOutput() | CompileFailed() | TimedOut() | Passed():
            return verdict.status
    return verdict.status


def verdict_message(verdict: Verdict) -> str:
    match verdict:
        case CompileFailed():
            return verdict.summary
        case TimedOut():
            return f"timed out ({verdict.phase}, limit {verdict.limit_s:g} s)"
        case Passed():
            return "passed"
        case _:
            return verdict.message


def row_from_evaluation(task: Task, kind: SolutionKind | None, result: EvalResult) -> TaskRow:
    """A task's row from its `evaluate` result: correct only when verify and profile both passed."""
    verify, profile = result.verify, result.profile
    base: dict[str, Any] = {
        "task_id": task.id,
        "name": task.name,
        "level": task.level,
        "solution": None,
        "solution_kind": kind,
        "reward": result.reward,
        "verify_verdict": verify.verdict,
        "environment": (profile or verify).environment,
        "evaluation_s": round(verify.wall_s + (profile.wall_s if profile else 0.0), 3),
        "phases_s": {f"verify.{k}": v for k, v in verify.phases_s.items()}
        | ({f"profile.{k}": v for k, v in profile.phases_s.items()} if profile else {}),
    }
    if not isinstance(verify.verdict, Passed):
        return TaskRow(
            **base,
            outcome="incorrect",
            failure=failure_kind(verify.verdict),
            message=one_line(verdict_message(verify.verdict)),
        )
    assert profile is not None
    timing: dict[str, Any] = {
        "profile_verdict": profile.verdict,
        "kernels": profile.kernels,
        "baselines_cached": profile.baselines_cached,
        "low_confidence": profile.low_confidence,
        "evidence_missing": profile.evidence_missing,
        "eager_ms": profile.eager.median_ms if profile.eager else None,
        "compile_ms": profile.compiled.median_ms if profile.compiled else None,
        "candidate_ms": profile.candidate.median_ms if profile.candidate else None,
        "timed_s": round(profile.candidate.samples * profile.candidate.mean_ms / 1e3, 4)
        if profile.candidate
        else None,
    }
    if not isinstance(profile.verdict, Passed):
        return TaskRow(
            **base,
            **timing,
            outcome="incorrect",
            failure=failure_kind(profile.verdict),
            message=one_line(verdict_message(profile.verdict)),
        )
    return TaskRow(
        **base,
        **timing,
        outcome="correct",
        speedup_vs_eager=profile.speedup_vs_eager,
        speedup_vs_compile=profile.speedup_vs_compile,
        speedup_vs_eager_ci=profile.speedup_vs_eager_ci,
        speedup_vs_compile_ci=profile.speedup_vs_compile_ci,
        speed_of_light=profile.speed_of_light,
        within_noise=profile.within_noise,
        faster_than_sol=profile.faster_than_sol,
    )


def one_line(text: str, limit: int = 300) -> str:
    """The first non-empty line (an exception's or a compiler's gist), whitespace folded, capped."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(first.split())
    more = "" if first.strip() == text.strip() else " (…)"
    return (line if len(line) <= limit else line[: limit - 1] + "…") + more

"""What the MCP server answers for the long tools: compact views of the tool layer's results.

An IDE assistant pays for every tool's output schema in its context window before its first call, and
for every answer it reads after. The tool layer's results (`results.py`) carry everything a trainer or a
report needs (per-sample timings, 64-hex content addresses, cache paths, per-phase seconds); an LLM
acting on a verdict needs its status, one line on what to do, and the few numbers it optimizes. So the
server answers with these views: a `summary` line first, then typed fields, with the details (compiler
diagnostics, audit findings, a mismatch, a crash's log tail) as short lines in the compiler's own
`file:line: severity: message` form. The full result of a session's latest call of each kind stays one
read away, as the resource `session://{session_id}/result/{kind}` (server/resources.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.results import (
    AuditFinding,
    BuildResult,
    CompileFailed,
    ContractViolation,
    Crashed,
    Diagnostic,
    EvalResult,
    Mismatch,
    Passed,
    ProfileResult,
    Rejected,
    TimedOut,
    Verdict,
    VerifyResult,
    WrongOutput,
)

MAX_DETAILS = 20  # lines of details a view carries; the full result has the rest
MAX_LINE = 400  # characters of one detail line


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VerdictView(_View):
    status: Literal[
        "passed", "wrong_output", "contract_violation", "compile_failed", "crashed", "timed_out", "rejected"
    ]
    reason: str | None = None
    message: str
    details: list[str] = []


class CompileView(_View):
    ok: bool
    summary: str
    diagnostics: list[str] = []
    kernels: list[str] = []
    log: str = ""
    wall_s: float


class VerifyView(_View):
    summary: str
    verdict: VerdictView
    trials: int
    sanitizer: str | None = None
    wall_s: float


class ProfileView(_View):
    summary: str
    verdict: VerdictView
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    low_confidence: bool = False
    kernels: list[str] = []
    notes: list[str] = []
    wall_s: float


class EvaluateView(_View):
    summary: str
    reward: float
    verify: VerifyView
    profile: ProfileView | None = None


ResultView = CompileView | VerifyView | ProfileView | EvaluateView


def _cut(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _lines(lines: list[str]) -> list[str]:
    kept = [_cut(line) for line in lines[:MAX_DETAILS]]
    if len(lines) > MAX_DETAILS:
        kept.append(f"… {len(lines) - MAX_DETAILS} more in the full result")
    return kept


def diagnostic_line(d: Diagnostic) -> str:
    where = d.file or d.tool
    if d.line is not None:
        where += f":{d.line}" + (f":{d.column}" if d.column else "")
    return f"{where}: {d.severity}: {d.message}"


def _finding_line(f: AuditFinding) -> str:
    return f"{f.file}{f':{f.line}' if f.line is not None else ''}: {f.rule}: {f.message}"


def _mismatch_line(m: Mismatch) -> str:
    return (
        f"output {m.output_index}: {m.mismatched} of {m.total} elements outside tolerance, max abs error "
        f"{m.max_abs_error:.3g}, max rel error {m.max_rel_error:.3g}; first at {m.first_index}: expected "
        f"{m.expected:.6g}, got {m.actual:.6g}"
    )


def verdict_view(verdict: Verdict) -> VerdictView:
    """A verdict as its status, the reason a refusal names, one message and its evidence as lines."""
    if isinstance(verdict, Passed):
        message = (
            f"{verdict.trials} trials within tolerance (max abs error {verdict.max_abs_error:.3g}, "
            f"max rel error {verdict.max_rel_error:.3g})"
        )
        return VerdictView(status="passed", message=message)
    if isinstance(verdict, WrongOutput):
        details = [_mismatch_line(verdict.mismatch)] if verdict.mismatch else []
        where = f"{verdict.phase}, trial {verdict.trial}, {verdict.distribution} inputs"
        return VerdictView(
            status="wrong_output",
            reason=verdict.phase,
            message=f"{verdict.message} ({where})",
            details=details,
        )
    if isinstance(verdict, ContractViolation):
        return VerdictView(status="contract_violation", reason=verdict.check, message=verdict.message)
    if isinstance(verdict, CompileFailed):
        return VerdictView(
            status="compile_failed",
            message=verdict.summary,
            details=_lines([diagnostic_line(d) for d in verdict.diagnostics]),
        )
    if isinstance(verdict, Crashed):
        # A Python exception's message is its traceback: its last line says what happened, its last
        # frames where; the worker's own output follows.
        lines = [line for line in verdict.message.strip().splitlines() if line.strip()]
        said = lines[-1] if lines else verdict.kind
        frames = lines[-9:-1] if len(lines) > 1 else []
        tail = verdict.log_tail.strip().splitlines()[-8:]
        return VerdictView(
            status="crashed",
            reason=verdict.kind,
            message=f"{said} (during {verdict.phase})",
            details=_lines(frames + tail),
        )
    if isinstance(verdict, TimedOut):
        return VerdictView(
            status="timed_out",
            reason=verdict.phase,
            message=f"a {verdict.phase} took longer than {verdict.limit_s:g} s and was killed",
        )
    assert isinstance(verdict, Rejected)
    return VerdictView(
        status="rejected",
        reason=verdict.reason,
        message=verdict.message,
        details=_lines([_finding_line(f) for f in verdict.findings]),
    )


def _headline(verdict: VerdictView) -> str:
    reason = f" ({verdict.reason})" if verdict.reason and verdict.status != "passed" else ""
    return f"{verdict.status}{reason}: {_cut(verdict.message, 300)}"


def compile_view(result: BuildResult) -> CompileView:
    diagnostics = [diagnostic_line(d) for d in result.diagnostics]
    kernels = [
        f"{k.name}: {k.registers} registers, {k.shared_memory_bytes} B shared, {k.stack_frame_bytes} B stack"
        + (f", spills {k.spill_stores_bytes}/{k.spill_loads_bytes} B st/ld" if k.spill_stores_bytes else "")
        for k in result.kernels
    ]
    # The compiler's log only where no diagnostic was parsed out of it: the same messages once, not twice.
    log = "" if diagnostics else result.log[-4000:]
    return CompileView(
        ok=result.ok,
        summary=result.summary,
        diagnostics=_lines(diagnostics),
        kernels=_lines(kernels),
        log=log,
        wall_s=result.wall_s,
    )


def verify_view(result: VerifyResult) -> VerifyView:
    verdict = verdict_view(result.verdict)
    sanitizer = None
    if result.sanitizer is not None:
        s = result.sanitizer
        sanitizer = f"{s.tool}: {s.status}" + (f": {_cut(s.message, 300)}" if s.message else "")
    return VerifyView(
        summary=_headline(verdict),
        verdict=verdict,
        trials=result.trials,
        sanitizer=sanitizer,
        wall_s=result.wall_s,
    )


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g} ms"


def profile_view(result: ProfileResult) -> ProfileView:
    verdict = verdict_view(result.verdict)
    candidate, eager, compiled = result.candidate, result.eager, result.compiled
    summary = _headline(verdict)
    if isinstance(result.verdict, Passed) and candidate is not None:
        summary = f"passed: ModelNew {_ms(candidate.median_ms)}"
        if eager is not None and result.speedup_vs_eager is not None:
            summary += f", {result.speedup_vs_eager:.2f}x eager ({_ms(eager.median_ms)})"
        if compiled is not None and result.speedup_vs_compile is not None:
            summary += f", {result.speedup_vs_compile:.2f}x torch.compile ({_ms(compiled.median_ms)})"
        if result.low_confidence:
            summary += "; noisy (low confidence)"
    kernels: list[str] = []
    if result.kernels is not None:
        kernels = [f"{k.total_ms:.4g} ms x{k.calls} {k.origin}: {k.name}" for k in result.kernels.kernels[:8]]
    notes = list(result.evidence_missing)
    if result.within_noise:
        notes.append("a speedup's confidence interval straddles a reward milestone: measure again to be sure")
    if result.speed_of_light is not None and result.speed_of_light.fraction is not None:
        sol = result.speed_of_light
        notes.append(
            f"speed of light: {sol.fraction:.0%} of the {sol.bound}-bound floor ({sol.t_sol_ms:.4g} ms)"
        )
    if result.ncu is not None:
        notes += [
            f"ncu {k.name}: {k.duration_us} us, SM {k.sm_throughput_pct}%, memory {k.memory_throughput_pct}%, "
            f"occupancy {k.achieved_occupancy_pct}%, {k.registers_per_thread} registers"
            for k in result.ncu.kernels[:8]
        ] + ([result.ncu.note] if result.ncu.note else [])
    return ProfileView(
        summary=summary,
        verdict=verdict,
        candidate_ms=candidate.median_ms if candidate else None,
        eager_ms=eager.median_ms if eager else None,
        compile_ms=compiled.median_ms if compiled else None,
        speedup_vs_eager=result.speedup_vs_eager,
        speedup_vs_compile=result.speedup_vs_compile,
        low_confidence=result.low_confidence,
        kernels=_lines(kernels),
        notes=_lines(notes),
        wall_s=result.wall_s,
    )


def evaluate_view(result: EvalResult) -> EvaluateView:
    verified = verify_view(result.verify)
    profiled = profile_view(result.profile) if result.profile is not None else None
    decided = profiled if profiled is not None else verified
    return EvaluateView(
        summary=f"reward {result.reward:g} ({result.reward_schedule}); {decided.summary}",
        reward=result.reward,
        verify=verified,
        profile=profiled,
    )


def view_of(result: BaseModel) -> ResultView:
    """The view the server answers with for a long tool's result."""
    if isinstance(result, BuildResult):
        return compile_view(result)
    if isinstance(result, VerifyResult):
        return verify_view(result)
    if isinstance(result, ProfileResult):
        return profile_view(result)
    if isinstance(result, EvalResult):
        return evaluate_view(result)
    raise TypeError(f"no view for {type(result).__name__}")

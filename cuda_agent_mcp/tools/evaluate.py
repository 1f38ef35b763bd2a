"""The `verify`, `profile` and `evaluate` tools: build, then hand the judge process a job.

The tool layer never imports torch or the candidate. It writes the pristine reference and a private copy
of the candidate (its Python files and the extension from the build cache) into a scratch directory,
runs the judge through the session's executor under a wall-clock limit, and reads back its report.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import BuildProgress, ProgressCallback
from cuda_agent_mcp.errors import JudgeFailed, TaskError
from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.evaluation.intervals import speedup_interval, straddles
from cuda_agent_mcp.evaluation.job import DISTRIBUTIONS, EvalJob, JudgeReport, Timeouts, TimingPolicy
from cuda_agent_mcp.evaluation.reference_copies import reference_copies
from cuda_agent_mcp.evaluation.reward import THRESHOLDS, RewardSchedule, reward
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.executors.health import probe_gpu
from cuda_agent_mcp.executors.scheduler import QueueStatus
from cuda_agent_mcp.results import (
    AuditFinding,
    BuildResult,
    CompileFailed,
    Crashed,
    EvalResult,
    NcuReport,
    Passed,
    ProfileResult,
    Rejected,
    TimedOut,
    Verdict,
    VerifyResult,
)
from cuda_agent_mcp.tools.build import CompileRequest, compile_kernels
from cuda_agent_mcp.tools.cpu_path import python_only
from cuda_agent_mcp.tools.gpu import require_gpu
from cuda_agent_mcp.tools.ncu import ncu_pass
from cuda_agent_mcp.tools.session import Session, judge_env
from cuda_agent_mcp.workspace import CANDIDATE_FILE, REFERENCE_FILE

STRICT_TOLERANCE = {"float32": 1e-4, "float64": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
# Honest fp32 kernels land near 1e-6 relative error norm; fp16 or TF32 rounding gives about 3e-4.
PRECISION_NORM_LIMIT = 1e-4
# An evaluation whose harness failed (issue 23: never the candidate's) runs again on a fresh judge, this
# many times, before it is reported as an infrastructure failure.
HARNESS_RETRIES = 2


class VerifyRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    trials: int = Field(default=5, ge=1, le=100, description="input sets, each from a fresh secret seed")
    strict: bool = Field(
        default=False, description="KernelBench's current fp32 tolerance (1e-4) instead of 1e-2"
    )
    device: Literal["cuda", "cpu"] = "cuda"
    call_timeout_s: float = Field(
        default=30.0, gt=0, description="limit on one forward() call; a hung kernel is killed"
    )
    audit: bool = Field(
        default=True, description="refuse sources that compute with PyTorch instead of kernels"
    )
    precision_check: bool | None = Field(
        default=None,
        description="refuse fp32/fp64 outputs whose error norm shows lower-precision arithmetic; None: "
        "the task's policy (on unless the task allows reduced precision)",
    )
    sanitize: Literal["off", "auto", "memcheck", "racecheck", "synccheck"] = Field(
        default="off",
        description="also run one call under compute-sanitizer (auto: memcheck); an error it reports rejects, "
        "a machine without it says 'unavailable'",
    )
    torch_glue: bool = Field(
        default=False,
        description="the 'kernelbench' rule set: PyTorch ops in ModelNew and host code are allowed (the "
        "audit's torch_compute rule and the runtime op audit are off); every other check stays",
    )
    timeout_s: float = Field(default=600.0, gt=0)


class ProfileRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    baselines: Literal["cached", "measure", "skip"] = "cached"
    budget_s: float = Field(default=2.0, gt=0, description="sampling budget per implementation")
    max_cv: float = Field(
        default=0.05,
        gt=0,
        description="above this coefficient of variation, measure again; then low confidence",
    )
    device: Literal["cuda", "cpu"] = "cuda"
    call_timeout_s: float = Field(
        default=30.0, gt=0, description="limit on one forward() call; a hung kernel is killed"
    )
    timeout_s: float = Field(default=900.0, gt=0)
    detail: Literal["summary", "ncu"] = Field(
        default="summary",
        description="'ncu': also profile one call with Nsight Compute (per-kernel duration, SM and memory "
        "throughput, occupancy, registers); diagnostics only, several seconds more",
    )
    ncu_timeout_s: float = Field(default=180.0, gt=0, description="limit on the ncu pass")
    precision_check: bool | None = Field(
        default=None,
        description="refuse fp32/fp64 timed outputs whose error norm shows lower-precision arithmetic "
        "(None: the task's policy, on by default)",
    )
    # The same static audit as verify's, so that profile never times what verify refuses.
    audit: bool = Field(
        default=True, description="refuse sources that compute with PyTorch instead of kernels"
    )
    torch_glue: bool = Field(
        default=False,
        description="the 'kernelbench' rule set: PyTorch ops in ModelNew and host code are allowed (the "
        "audit's torch_compute rule is off); every other check stays",
    )


class EvaluateRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # The compute-sanitizer gate is on by default for evaluate (where the machine has it).
    verify: VerifyRequest = VerifyRequest(sanitize="auto")
    profile: ProfileRequest = ProfileRequest()
    reward_schedule: RewardSchedule = "milestones"


async def verify_kernels(
    session: Session, request: VerifyRequest | None = None, *, progress: ProgressCallback | None = None
) -> VerifyResult:
    """Build, then check ModelNew against Model on fresh secret inputs in a separate worker."""
    require_gpu((request or VerifyRequest()).device, scheduler=session.scheduler)
    return await _journaled(session, "verify", lambda: _verify(session, request or VerifyRequest(), progress))


async def profile_kernels(
    session: Session, request: ProfileRequest | None = None, *, progress: ProgressCallback | None = None
) -> ProfileResult:
    """Build, then time ModelNew (every timed output rechecked) and the eager and compiled baselines."""
    require_gpu((request or ProfileRequest()).device, scheduler=session.scheduler)
    return await _journaled(
        session, "profile", lambda: _profile(session, request or ProfileRequest(), progress)
    )


async def evaluate_kernels(
    session: Session, request: EvaluateRequest | None = None, *, progress: ProgressCallback | None = None
) -> EvalResult:
    """verify, then (if it passed) profile, then the reward: what an RL rollout ends with."""
    request = request or EvaluateRequest()
    require_gpu(request.verify.device, request.profile.device, scheduler=session.scheduler)
    return await _journaled(
        session, "evaluate", lambda: _evaluate(session, request or EvaluateRequest(), progress)
    )


_Result = TypeVar("_Result", VerifyResult, ProfileResult, EvalResult)


async def _journaled(session: Session, kind: str, run: Callable[[], Awaitable[_Result]]) -> _Result:
    """Run a tool with a journal record around it: opened before, closed with the result before anyone
    sees it, or with the error; a killed process leaves it to be marked interrupted."""
    journal = session.journal
    record = journal.begin(
        kind=kind, session_id=session.id, task_id=session.task.id, task_hash=session.task.content_hash
    )
    try:
        # Every result says which rules it was judged under (run_judge refused a judge of other rules).
        result = (await run()).model_copy(update={"rules_version": VERDICT_RULES_VERSION})
    except BaseException as exc:  # cancellation included: the record must not stay "running"
        journal.fail(record, f"{type(exc).__name__}: {exc}")
        raise
    verdict = (
        result.verdict if not isinstance(result, EvalResult) else (result.profile or result.verify).verdict
    )
    source_hash = result.source_hash if not isinstance(result, EvalResult) else result.verify.source_hash
    environment = (
        result.environment
        if not isinstance(result, EvalResult)
        else ((result.profile or result.verify).environment)
    )
    journal.finish(record, result, verdict=verdict.status, source_hash=source_hash, environment=environment)
    return result


async def _verify(
    session: Session, request: VerifyRequest, progress: ProgressCallback | None
) -> VerifyResult:
    started = time.monotonic()
    build = await compile_kernels(session, CompileRequest(), progress=progress)
    if not build.ok and not python_only(build, request.device):
        return VerifyResult(
            verdict=CompileFailed(summary=build.summary, diagnostics=build.diagnostics),
            source_hash=build.source_hash,
            build_key=None,
            trials=0,
            distributions=[],
            wall_s=round(time.monotonic() - started, 3),
        )
    if request.audit and (findings := _audit(session, build, torch_glue=request.torch_glue)):
        return VerifyResult(
            verdict=Rejected(reason="forbidden_op", message=_describe(findings), findings=findings),
            source_hash=build.source_hash,
            build_key=build.build_key,
            trials=0,
            distributions=[],
            wall_s=round(time.monotonic() - started, 3),
        )
    tolerance = _tolerance(session, request.strict)
    report = await run_judge(
        session,
        workspace_candidate(session, build),
        progress=progress,
        mode="verify",
        device=request.device,
        seeds=[session.draw_seed() for _ in range(request.trials)],
        atol=tolerance[0],
        rtol=tolerance[1],
        timeout_s=request.timeout_s,
        timeouts=Timeouts(call_s=request.call_timeout_s),
        op_audit=request.audit and not request.torch_glue,
        max_error_norm=PRECISION_NORM_LIMIT if _precision_check(session, request) else None,
        sanitize=None
        if request.sanitize == "off"
        else "memcheck"
        if request.sanitize == "auto"
        else request.sanitize,
    )
    return VerifyResult(
        verdict=report.verdict,
        source_hash=build.source_hash,
        build_key=build.build_key,
        trials=request.trials,
        distributions=report.distributions,
        wall_s=round(time.monotonic() - started, 3),
        phases_s={"build": build.wall_s, **report.phases_s},
        environment=report.environment,
        hidden_sizes=report.hidden_sizes,
        judged_against=report.judged_against,
        sanitizer=report.sanitizer,
    )


async def _profile(
    session: Session, request: ProfileRequest, progress: ProgressCallback | None
) -> ProfileResult:
    started = time.monotonic()
    build = await compile_kernels(session, CompileRequest(), progress=progress)
    if not build.ok and not python_only(build, request.device):
        return ProfileResult(
            verdict=CompileFailed(summary=build.summary, diagnostics=build.diagnostics),
            source_hash=build.source_hash,
            wall_s=round(time.monotonic() - started, 3),
        )
    if request.audit and (findings := _audit(session, build, torch_glue=request.torch_glue)):
        return ProfileResult(
            verdict=Rejected(reason="forbidden_op", message=_describe(findings), findings=findings),
            source_hash=build.source_hash,
            build_key=build.build_key,
            wall_s=round(time.monotonic() - started, 3),
        )
    atol, rtol = _tolerance(session, strict=False)
    attempts = 0
    first_verdict: Verdict | None = None
    while True:
        attempts += 1
        report = await run_judge(
            session,
            workspace_candidate(session, build),
            progress=progress,
            mode="profile",
            device=request.device,
            seeds=[session.draw_seed()],
            atol=atol,
            rtol=rtol,
            timeout_s=request.timeout_s,
            baselines=request.baselines,
            timing=TimingPolicy(budget_s=request.budget_s),
            timeouts=Timeouts(call_s=request.call_timeout_s),
            workspace_kernels=sorted({kernel.name for kernel in build.kernels}),
            max_error_norm=PRECISION_NORM_LIMIT if _precision_check(session, request) else None,
        )
        noisy = report.candidate is not None and report.candidate.cv > request.max_cv
        if not worth_remeasuring(report, request.max_cv) or attempts >= 2:
            break
        first_verdict = report.verdict  # measured once more, in fresh processes
    candidate, eager, compiled = report.candidate, report.eager, report.compiled
    eager_ci, compile_ci = speedup_interval(eager, candidate), speedup_interval(compiled, candidate)
    missing = list(report.evidence_missing)
    if isinstance(report.verdict, Passed) and eager is not None and (eager_ci is None or compile_ci is None):
        missing.append("speedup_intervals: a side of a speedup has no per-call samples")
    detail = None
    if request.detail == "ncu":
        detail = await _ncu_detail(session, build, request, progress)
    return ProfileResult(
        verdict=report.verdict,
        candidate=candidate,
        eager=eager,
        compiled=compiled,
        speedup_vs_eager=eager.median_ms / candidate.median_ms if candidate and eager else None,
        speedup_vs_compile=compiled.median_ms / candidate.median_ms if candidate and compiled else None,
        baselines_cached=report.baselines_cached,
        physical_floor_ms=report.physical_floor_ms,
        gpu=report.gpu,
        source_hash=build.source_hash,
        build_key=build.build_key,
        low_confidence=noisy,
        kernels=report.kernels,
        wall_s=round(time.monotonic() - started, 3),
        phases_s={"build": build.wall_s, **report.phases_s},
        environment=report.environment,
        measurements=attempts,
        first_verdict=first_verdict,
        ncu=detail,
        speedup_vs_eager_ci=eager_ci,
        speedup_vs_compile_ci=compile_ci,
        speed_of_light=report.speed_of_light,
        evidence_missing=missing,
        faster_than_sol=report.faster_than_sol,
        judged_against=report.judged_against,
        within_noise=any(straddles(ci, t) for ci in (eager_ci, compile_ci) for t in THRESHOLDS["milestones"]),
    )


async def _ncu_detail(
    session: Session, build: BuildResult, request: ProfileRequest, progress: ProgressCallback | None
) -> NcuReport:
    if request.device != "cuda":
        return NcuReport(note="the ncu pass needs device='cuda'")
    # Exclusive: kernel replay would disturb anyone timing on the same GPU.
    async with _gpu_lease(session, exclusive=True, device=request.device, progress=progress) as gpu:
        return await ncu_pass(
            session,
            workspace_candidate(session, build),
            {kernel.name for kernel in build.kernels},
            scratch_root=_scratch_root(session),
            gpu=gpu,
            timeout_s=request.ncu_timeout_s,
        )


async def _evaluate(
    session: Session, request: EvaluateRequest, progress: ProgressCallback | None
) -> EvalResult:
    verified = await verify_kernels(session, request.verify, progress=progress)
    if not isinstance(verified.verdict, Passed):
        return EvalResult(
            verify=verified,
            profile=None,
            reward=reward(request.reward_schedule, False, None, None),
            reward_schedule=request.reward_schedule,
        )
    # Evaluate's audit is its verify's: the profile refuses and allows exactly what the verify did.
    audit = {"audit": request.verify.audit, "torch_glue": request.verify.torch_glue}
    profiled = await profile_kernels(session, request.profile.model_copy(update=audit), progress=progress)
    passed = isinstance(profiled.verdict, Passed) and profiled.source_hash == verified.source_hash
    intervals = (profiled.speedup_vs_eager_ci, profiled.speedup_vs_compile_ci)
    value = reward(
        request.reward_schedule,
        passed,
        profiled.speedup_vs_eager,
        profiled.speedup_vs_compile,
        # A milestone needs the interval's lower bound past it: a speedup measured through noise has a
        # wide interval and earns no step it cannot show (principle 11).
        lower_bounds=(intervals[0].low, intervals[1].low) if intervals[0] and intervals[1] else None,
        # Missing evidence (no kernel trace, no intervals) leaves the timing untrusted: correctness only.
        capped=bool(profiled.evidence_missing),
    )
    return EvalResult(
        verify=verified, profile=profiled, reward=value, reward_schedule=request.reward_schedule
    )


def worth_remeasuring(report: JudgeReport, max_cv: float) -> bool:
    """A profile gets one more run in fresh processes when its timings were noisy, or when the clocks
    disagreed: on the H200 an honest small kernel is occasionally rejected that way (the judge's clock
    running ~0.7 ms per call beyond the worker's in one run and not in the next), while a candidate that
    hides work does so on every run."""
    if report.candidate is not None and report.candidate.cv > max_cv:
        return True
    if report.faster_than_sol:
        return True  # faster than speed of light: never taken on one measurement (principle 5)
    return isinstance(report.verdict, Rejected) and report.verdict.reason == "timing_disagreement"


def _audit(session: Session, build: BuildResult, *, torch_glue: bool = False) -> list[AuditFinding]:
    """The static audit of the sources, and copies of the reference among the candidate's files (a
    CuPy workspace's cuda_extension may be used for the kernels its build made, and nothing else)."""
    kernels = [k.mangled_name for k in build.kernels] if build.language == "cupy" else None
    findings = audit_workspace(
        session.workspace.root, session.task.vendor_libraries, kernels, language=build.language
    )
    # KernelBench lets ModelNew keep PyTorch ops around its kernels; its other rules still hold.
    if torch_glue:
        findings = [f for f in findings if f.rule != "torch_compute"]
    return [*findings, *reference_copies(session.workspace.python_files(), session.workspace.reference_code)]


def _precision_check(session: Session, request: VerifyRequest | ProfileRequest) -> bool:
    """The request's switch, else the task's policy (on by default)."""
    if request.precision_check is not None:
        return request.precision_check
    return session.task.policy.precision_check


def _describe(findings: list[AuditFinding]) -> str:
    first = findings[0]
    where = f"{first.file}:{first.line}" if first.line else first.file
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{where}: {first.message}{more}"


def _tolerance(session: Session, strict: bool) -> tuple[float, float]:
    policy = session.task.policy
    if strict:
        value = STRICT_TOLERANCE.get(policy.dtype, policy.tolerance.atol)
        return value, value
    return policy.tolerance.atol, policy.tolerance.rtol


_JUDGE_STEP = {
    "verify": "the judge checks ModelNew against Model on {trials} input sets",
    "profile": "the judge times ModelNew, PyTorch eager and torch.compile",
}


async def run_judge(
    session: Session,
    stage_candidate: Callable[[Path], None],
    *,
    mode: Literal["verify", "profile", "baselines"],
    device: str,
    seeds: list[int],
    atol: float,
    rtol: float,
    timeout_s: float,
    baselines: Literal["cached", "measure", "skip"] = "skip",
    timing: TimingPolicy | None = None,
    timeouts: Timeouts | None = None,
    op_audit: bool = False,
    max_error_norm: float | None = None,
    sanitize: Literal["memcheck", "racecheck", "synccheck"] | None = None,
    workspace_kernels: list[str] | None = None,
    progress: ProgressCallback | None = None,
) -> JudgeReport:
    require_gpu(device, scheduler=session.scheduler)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-eval-", dir=_scratch_root(session)) as tmp:
        scratch = Path(tmp)
        reference = scratch / "reference" / REFERENCE_FILE
        reference.parent.mkdir()
        reference.write_text(session.workspace.reference_code)
        candidate = scratch / "candidate"
        candidate.mkdir()
        stage_candidate(candidate)
        job = EvalJob(
            mode=mode,
            reference_path=str(reference),
            candidate_dir=str(candidate),
            device=device,
            seeds=seeds,
            init_seed=session.draw_seed(),
            distributions=[d for d in DISTRIBUTIONS if d != "resized" or session.task.policy.hidden_sizes],
            atol=atol,
            rtol=rtol,
            baselines=baselines,
            baseline_cache_path=str(session.cache_dir / "baselines.json"),
            baseline_key=session.task.content_hash,
            timing=timing or TimingPolicy(),
            timeouts=timeouts or Timeouts(),
            op_audit=op_audit,
            max_error_norm=max_error_norm,
            sanitize=sanitize,
            workspace_kernels=workspace_kernels or [],
            vendor_libraries=list(session.task.vendor_libraries),
        )
        # Timing holds its GPU alone; correctness-only work may share one (see executors/scheduler.py).
        exclusive = mode != "verify"
        async with _gpu_lease(session, exclusive=exclusive, device=device, progress=progress) as gpu:
            judge_started = time.monotonic()
            if progress is not None and mode != "baselines":
                progress(BuildProgress(stage=mode, message=_JUDGE_STEP[mode].format(trials=len(seeds))))
            env = judge_env(gpu, session.worker_backend, session.judge_tenant)
            await anyio.to_thread.run_sync(session.check_worker_backend, env)
            for attempt in range(1 + HARNESS_RETRIES):
                try:
                    report, startup_s = await session.judges.run(job, env, timeout_s)
                except JudgeFailed:
                    await _check_gpu(session, gpu)
                    raise
                if needs_health_check(report):
                    await _check_gpu(session, gpu)  # before the lease goes to the next job
                if not report.infra_error:
                    break
                # A failed harness step is the machine's: again on a fresh judge (the pool retires the
                # one that reported it), and reported as infrastructure only if it persists.
                if progress is not None and attempt < HARNESS_RETRIES:
                    message = f"the harness failed (not the candidate): again on a fresh judge, {attempt + 1} of {HARNESS_RETRIES}"
                    progress(
                        BuildProgress(stage="retry", message=message, done=attempt + 1, total=HARNESS_RETRIES)
                    )
        if report.task_error:
            raise TaskError(f"task error: {report.task_error[-2000:]}")
        if report.infra_error:
            raise JudgeFailed(
                f"the judge failed ({1 + HARNESS_RETRIES} attempts on fresh judges): {report.infra_error[-2000:]}"
            )
        if report.rules_version != VERDICT_RULES_VERSION:  # its verdicts must not pass for ours
            raise JudgeFailed(
                f"the judge ran verdict rules {report.rules_version}, this process {VERDICT_RULES_VERSION}: "
                "the installation changed under a running process; restart it"
            )
        judge_s = round(time.monotonic() - judge_started, 4)
        phases = {"judge": judge_s, "judge_start": startup_s, **report.phases_s}
        return report.model_copy(update={"phases_s": phases})


def workspace_candidate(session: Session, build: BuildResult) -> Callable[[Path], None]:
    """Stages the candidate's Python files (not model.py: the reference is not importable) and the
    extension from the build cache."""
    return lambda target: _copy_candidate(session, build, target)


def _copy_candidate(session: Session, build: BuildResult, target: Path) -> None:
    modules = session.workspace.python_files()
    copies = {f.file for f in reference_copies(modules, session.workspace.reference_code)}
    for path in modules:
        if path.name not in copies:  # refused by the audit already; never staged even without it
            shutil.copyfile(path, target / path.name, follow_symlinks=False)
    if not (target / CANDIDATE_FILE).exists():
        (target / CANDIDATE_FILE).write_text("raise ImportError('the workspace has no model_new.py')\n")
    if build.extension_path is not None:  # None: a pure-PyTorch candidate on the CPU (python_only)
        # cuda_extension.so, or a CuPy workspace's generated cuda_extension.py: the build's copy, always.
        shutil.copy(build.extension_path, target / Path(build.extension_path).name)


def needs_health_check(report: JudgeReport) -> bool:
    """After a CUDA error, a dead worker, a timeout or a judge failure the GPU may be unusable."""
    verdict = report.verdict
    if report.infra_error or isinstance(verdict, TimedOut):
        return True
    return isinstance(verdict, Crashed) and verdict.kind in ("cuda_error", "process_exited")


async def _check_gpu(session: Session, gpu: int | None) -> None:
    """Probe a leased GPU; one that fails is drained from the session's scheduler (and so from every
    session sharing it) and stays so until an operator restarts the server. Leftover processes are looked
    for only while this lease is the GPU's only one: beside other evaluations, theirs are alive."""
    if gpu is None or session.scheduler is None:
        return
    alone = session.scheduler.holders(gpu) <= 1
    problem = await anyio.to_thread.run_sync(partial(probe_gpu, gpu, look_for_leftovers=alone))
    session.scheduler.record_probe(gpu, problem)


@asynccontextmanager
async def _gpu_lease(
    session: Session, *, exclusive: bool, device: str, progress: ProgressCallback | None = None
) -> AsyncIterator[int | None]:
    """A lease from the session's scheduler (shared by every session of a server or trainer), if any;
    while it waits, `progress` hears its place in line."""
    if session.scheduler is None or device != "cuda":
        yield None
        return

    def waiting(status: QueueStatus) -> None:
        if progress is not None:
            message = f"waiting for a GPU: {status.position} of {status.waiting} in line"
            progress(BuildProgress(stage="queue", message=message, done=0, total=status.waiting))

    async with session.scheduler.lease(session.id, exclusive=exclusive, on_wait=waiting) as lease:
        yield lease.gpu


def _scratch_root(session: Session) -> Path:
    root = session.cache_dir / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    return root

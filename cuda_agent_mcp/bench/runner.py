"""`run_suite`: score a task set's solutions with the tool layer's evaluator and write the report.

Per task: find (or import, or generate with a policy) the solution, build it, make sure the task's
baselines exist (a failure there is the task's: a task error, outside every denominator), then
`evaluate_kernels` (verify, profile, reward) under the rule set. Builds run several at a time (CPU
work); GPU work goes through one scheduler shared by every task's session, at most `concurrency` tasks
at once (default two per GPU), so timed work holds a GPU alone. Each finished task is a durable row
(rundir.py); the journal holds every evaluation, so a run killed between the two still finds its result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
from pydantic import ValidationError

from cuda_agent_mcp.agent.client import PolicyClient
from cuda_agent_mcp.agent.policy import Budgets, PolicyPreset
from cuda_agent_mcp.agent.snapshot import restore
from cuda_agent_mcp.bench import baselines as tables
from cuda_agent_mcp.bench.kernelbench_import import import_kernelbench_solution
from cuda_agent_mcp.bench.models import (
    SolutionKind,
    SuiteProgress,
    SuiteRequest,
    SuiteResult,
    TaskRow,
)
from cuda_agent_mcp.bench.report import write_report
from cuda_agent_mcp.bench.rows import build_stats, row_from_evaluation, simple_row
from cuda_agent_mcp.bench.rules import check_rules, evaluate_request, task_under
from cuda_agent_mcp.bench.rundir import RunDirectory
from cuda_agent_mcp.bench.selection import select_tasks
from cuda_agent_mcp.bench.solutions import (
    check_language,
    digest,
    find_solutions,
    single_file_language,
    solution_language,
    workspace_files,
)
from cuda_agent_mcp.bench.summary import build_summary, register_run
from cuda_agent_mcp.build import BuildLimits, default_cache_dir
from cuda_agent_mcp.errors import CudaAgentError, GpusDrained, InfraError, UsageError
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.results import EvalResult, KernelLanguage
from cuda_agent_mcp.tasks import Task, TaskCatalog
from cuda_agent_mcp.tools import EvaluateRequest, Session, compile_kernels, evaluate_kernels
from cuda_agent_mcp.tools.cpu_path import python_only
from cuda_agent_mcp.tools.gpu import visible_gpu_scheduler

T = TypeVar("T")
EvaluateStep = Callable[[Session, EvaluateRequest], Awaitable[EvalResult]]
BaselineStep = Callable[[Session, str, float], Awaitable[tables.BaselineResult]]
ProgressSink = Callable[[SuiteProgress], None]
# An imported KernelBench unit compiles torch's headers under nvcc, as load_inline does: measured 156-196 s
# on a loaded two-core machine, against the 180 s the workspace layout's pure-CUDA units get.
KERNELBENCH_BUILD_LIMITS = BuildLimits(compile_timeout_s=900.0)


async def _task_baselines(session: Session, device: str, budget_s: float) -> tables.BaselineResult:
    return await tables.task_baselines(session, device=device, budget_s=budget_s)


@dataclass(frozen=True)
class Steps:
    """The GPU steps of a task; tests of the scheduling replace them, everything else uses these."""

    evaluate: EvaluateStep = evaluate_kernels
    baselines: BaselineStep = _task_baselines


async def run_suite(
    request: SuiteRequest,
    *,
    catalog: TaskCatalog | None = None,
    scheduler: GpuScheduler | None = None,
    progress: ProgressSink | None = None,
    cache_dir: Path | None = None,
    steps: Steps | None = None,
) -> SuiteResult:
    """Score every selected task and write the report into `request.out_dir` (resuming the run held
    there, if it is this one). Candidate failures are rows; UsageError before anything runs for bad
    requests; the report is written also when the run is interrupted."""
    check_rules(request.rules, request.solutions.kind)
    check_language(request.solutions)
    policy = _policy(request)
    tasks = select_tasks(request, catalog)
    solutions, ignored = find_solutions(request.solutions, tasks)
    if request.only_with_solutions and request.solutions.kind != "policy":
        tasks = [t for t in tasks if t.id in solutions]
        if not tasks:
            raise UsageError(f"no selected task has a solution in {request.solutions.path}")
    out = Path(request.out_dir)
    run_dir = RunDirectory.open(out, request, [t.id for t in tasks], overwrite=request.overwrite)
    cache = cache_dir or default_cache_dir()
    register_run(cache, run_dir.run_id, out)
    if scheduler is None and request.device == "cuda":
        scheduler = visible_gpu_scheduler()
    gpus = len(scheduler.status()) if scheduler is not None else 0
    ctx = _Context(
        request=request,
        run_dir=run_dir,
        cache_dir=cache,
        scheduler=scheduler,
        steps=steps or Steps(),
        solutions=solutions,
        evaluation=evaluate_request(
            request.rules,
            device=request.device,
            audit=request.audit,
            trials=request.trials,
            budget_s=request.budget_s,
            schedule=request.reward_schedule,
        ),
        gpu_limit=anyio.CapacityLimiter(request.concurrency or max(2 * gpus, 1)),
        build_limit=anyio.CapacityLimiter(max(2, (os.cpu_count() or 2) // 2)),
        progress=progress,
        work=out / "work",
        policy=policy,
    )
    shutil.rmtree(ctx.work, ignore_errors=True)  # workspaces a killed run left behind
    ctx.prepare_baselines(tasks)
    todo = [t for t in tasks if ctx.needs_run(t)]
    ctx.total, ctx.resumed = len(tasks), len(tasks) - len(todo)
    started = time.time()
    complete = False
    try:
        ctx.emit("")
        async with anyio.create_task_group() as group:
            for task in todo:
                group.start_soon(ctx.score, task)
        complete = not any(r.outcome == "infra_error" for r in run_dir.rows.values())
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
        summary = build_summary(
            run_dir, request, started_at=started, complete=complete and len(run_dir.rows) == len(tasks)
        )
        files = write_report(out, summary, run_dir.ordered())
    return SuiteResult(
        summary=summary,
        rows=run_dir.ordered(),
        out_dir=str(out),
        report_html=str(out / "report.html"),
        files=files,
        ignored_solutions=ignored,
    )


@dataclass(frozen=True)
class _Policy:
    preset: PolicyPreset
    client: PolicyClient
    budgets: Budgets | None


def _policy(request: SuiteRequest) -> _Policy | None:
    """The policy of a policy run, checked before anything runs (preset, endpoint, the agent extra)."""
    spec = request.solutions
    if spec.kind != "policy":
        return None
    from cuda_agent_mcp import agent

    try:
        preset = agent.load_policy(spec.policy)
        if spec.model:
            preset = preset.model_copy(
                update={"model": spec.model, "served_model_name": None, "lora_adapter": None}
            )
        client = agent.PolicyClient(preset, spec.base_url)
    except CudaAgentError as exc:
        raise UsageError(str(exc)) from None
    budgets = preset.budgets.model_copy(update={"max_turns": spec.max_turns}) if spec.max_turns else None
    return _Policy(preset=preset, client=client, budgets=budgets)


@dataclass
class _Context:
    request: SuiteRequest
    run_dir: RunDirectory
    cache_dir: Path
    scheduler: GpuScheduler | None
    steps: Steps
    solutions: dict[str, Path]
    evaluation: EvaluateRequest
    gpu_limit: anyio.CapacityLimiter
    build_limit: anyio.CapacityLimiter
    progress: ProgressSink | None
    work: Path
    total: int = 0
    resumed: int = 0
    done_now: int = 0
    running: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    known_failures: dict[str, str] = field(default_factory=dict)
    judge_identities: set[tuple[str, str]] = field(default_factory=set)
    writer: tables.TableWriter | None = None
    policy: _Policy | None = None

    # -- baselines -------------------------------------------------------------------------------

    def prepare_baselines(self, tasks: list[Task]) -> None:
        """Seed the judge's cache from the committed tables of this machine; open the table to record."""
        environment = tables.local_environment(self.request.device, self.cache_dir)
        loaded = tables.matching(
            tables.load_tables([Path(p) for p in self.request.baseline_tables]), environment
        )
        tables.seed_judge_cache(loaded, tasks, self.cache_dir)
        self.known_failures = tables.known_failures(loaded, tasks)
        self.judge_identities = {(e.judge_gpu, e.judge_torch) for t in loaded for e in t.entries.values()}
        if self.request.record_baselines and environment is not None:
            directory = Path(self.request.record_baselines)
            self.writer = tables.TableWriter(tables.table_path(directory, environment), environment)

    def baselines_cached(self, task: Task) -> bool:
        """Whether the judge's cache holds this task's baselines for a judge identity seen here."""
        if not self.judge_identities:
            return False
        try:
            keys = set(json.loads((self.cache_dir / "baselines.json").read_text()))
        except (OSError, ValueError, TypeError):
            return False
        return any(f"{task.content_hash}:{gpu}:{torch}" in keys for gpu, torch in self.judge_identities)

    def record_baselines(self, task: Task, result: tables.BaselineResult) -> None:
        if result.verdict.status == "passed":
            self.judge_identities.add((result.gpu, result.environment.get("torch", "")))
        if self.writer is not None and not self.writer.has(task):
            self.writer.record(task, result)

    # -- one task --------------------------------------------------------------------------------

    def needs_run(self, task: Task) -> bool:
        row = self.run_dir.rows.get(task.id)
        if row is None or row.outcome == "infra_error":
            return True
        path = self.solutions.get(task.id)
        try:
            language = self._language(path)
        except UsageError:
            return True  # its language record cannot be read: reported again (nothing is evaluated)
        return (
            row.solution != (str(path) if path else None)
            or (path is not None and row.solution_digest != self._digest(path))
            or row.language != language
        )

    def _language(self, path: Path | None) -> KernelLanguage:
        """The kernel language a task's solution is built as: a workspace's own record, else the tree's; a
        single file's own (Triton where it imports triton, else CUDA) (docs/bench.md); UsageError where
        the solution's record cannot be read."""
        spec = self.request.solutions
        if spec.kind == "kernelbench":
            return single_file_language(path, spec.language) if path is not None else spec.language
        if spec.kind == "workspaces" and path is not None:
            return solution_language(path, spec.language)
        return spec.language

    def _row_language(self, task: Task) -> KernelLanguage:
        try:
            return self._language(self.solutions.get(task.id))
        except UsageError:
            return self.request.solutions.language

    def _digest(self, path: Path) -> str | None:
        try:
            if self.request.solutions.kind == "workspaces":
                return digest(workspace_files(path))
            return digest({path.name: path.read_text(encoding="utf-8", errors="replace")})
        except (OSError, CudaAgentError):
            return None

    async def score(self, task: Task) -> None:
        self.running.append(task.id)
        self.emit("")
        try:
            row = await self._score(task)
        except GpusDrained:
            raise  # every GPU is drained: nothing more can be measured
        except (CudaAgentError, OSError) as exc:  # ours or the machine's: never scored, run again next time
            row = simple_row(
                task,
                self._kind(),
                None,
                "infra_error",
                "infrastructure",
                str(exc),
                language=self._row_language(task),
            )
        self.running.remove(task.id)
        self.run_dir.append(row)
        self.done_now += 1
        self.emit(f"{task.id}: {row.outcome}" + (f" ({row.failure})" if row.failure else ""))

    def _kind(self) -> SolutionKind:
        kind = self.request.solutions.kind
        return "workspace" if kind == "workspaces" else kind

    async def _score(self, task: Task) -> TaskRow:
        started = time.monotonic()
        kind = self._kind()
        path = self.solutions.get(task.id)
        try:
            language = self._language(path)
        except UsageError as exc:  # the solution's own language record is broken: its failure
            return simple_row(
                task,
                kind,
                str(path),
                "incorrect",
                "import_failed",
                str(exc),
                language=self.request.solutions.language,
            )
        if kind != "policy" and path is None:
            if task.id in self.known_failures:
                return simple_row(
                    task,
                    kind,
                    None,
                    "task_error",
                    "baseline_failed",
                    self.known_failures[task.id],
                    language=language,
                )
            return simple_row(
                task,
                kind,
                None,
                "incorrect",
                "missing_solution",
                "no solution found for this task",
                language=language,
            )
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.id).strip("-")
        solution_digest = self._digest(path) if path is not None else None
        # The session id names the run, the task, the solution's files and (other than CUDA) their
        # language: a resumed run finds in the journal only evaluations of exactly these files, built so.
        suffix = f"-{solution_digest[:12]}" if solution_digest else ""
        suffix += f"-{language}" if language != "cuda" else ""
        session = Session.create(
            task_under(self.request.rules, task, kind),
            self.work / slug,
            scheduler=self.scheduler,
            cache_dir=self.cache_dir,
            id=f"bench-{self.run_dir.run_id}-{slug}{suffix}",
            build_limits=KERNELBENCH_BUILD_LIMITS if kind == "kernelbench" else BuildLimits(),
            language=language,
        )
        try:
            row = await self._score_in(task, session, kind, path, slug, solution_digest, started)
            return row.model_copy(update={"language": language})
        finally:
            shutil.rmtree(session.workspace.root, ignore_errors=True)

    async def _score_in(
        self,
        task: Task,
        session: Session,
        kind: SolutionKind,
        path: Path | None,
        slug: str,
        solution_digest: str | None,
        started: float,
    ) -> TaskRow:
        solution = str(path) if path else None
        if kind == "policy":
            async with self.gpu_limit:
                message = await self._run_policy(session, slug)
            if message:
                return simple_row(task, kind, None, "infra_error", "infrastructure", message)
        async with self.build_limit:
            if path is not None:
                files, failure = await self._solution_files(session, kind, path, slug)
                if files is None:
                    return simple_row(task, kind, solution, "incorrect", "import_failed", failure)
                restore(session, files)
            build = await compile_kernels(session)
        stats = build_stats(build)
        common = {"solution": solution, "solution_digest": solution_digest, "build": stats}
        # On the CPU a solution without kernel sources is a pure-PyTorch ModelNew (as for verify).
        if not build.ok and not python_only(build, self.request.device):
            return simple_row(task, kind, solution, "incorrect", "compile_failed", build.summary).model_copy(
                update={**common, "wall_s": round(time.monotonic() - started, 3)}
            )
        result = self._journaled(session, build.source_hash) if solution_digest else None
        if result is None:
            async with self.gpu_limit:
                if not self.baselines_cached(task):
                    base = await self._retrying(
                        lambda: self.steps.baselines(session, self.request.device, self.request.budget_s)
                    )
                    self.record_baselines(task, base)
                    if base.verdict.status != "passed":
                        message = getattr(base.verdict, "message", base.verdict.status)
                        failed = simple_row(
                            task, kind, solution, "task_error", "baseline_failed", str(message)
                        )
                        return failed.model_copy(update={**common, "baseline_verdict": base.verdict})
                result = await self._retrying(lambda: self.steps.evaluate(session, self.evaluation))
        record = next(
            (r.id for r in session.journal.records(session_id=session.id, limit=20) if r.kind == "evaluate"),
            None,
        )
        row = row_from_evaluation(task, kind, result)
        return row.model_copy(
            update={**common, "journal_record": record, "wall_s": round(time.monotonic() - started, 3)}
        )

    async def _solution_files(
        self, session: Session, kind: SolutionKind, path: Path, slug: str
    ) -> tuple[dict[str, str] | None, str]:
        if kind == "workspace":
            try:
                return workspace_files(path), ""
            except (OSError, UsageError) as exc:
                return None, str(exc)
        imported = await import_kernelbench_solution(
            path, executor=session.executor, scratch_root=session.cache_dir / "tmp"
        )
        if not imported.ok:
            return None, imported.message
        if imported.language != session.workspace.language:  # the file changed since it was read
            return None, f"the solution is {imported.language}, its workspace {session.workspace.language}"
        kept = self.run_dir.path / "imports" / slug  # how the file was imported, for its author
        for name, text in imported.files.items():
            (kept / name).parent.mkdir(parents=True, exist_ok=True)
            (kept / name).write_text(text)
        return imported.files, ""

    async def _run_policy(self, session: Session, slug: str) -> str:
        """Run the agent loop on the task; its workspace ends with the best verified kernel. Returns why
        the policy could not run, or ''."""
        from cuda_agent_mcp import agent  # the agent extra: only policy runs need it

        assert self.policy is not None
        settings = agent.EnvironmentSettings(
            device=self.request.device, audit=self.request.audit, language=session.workspace.language
        )
        result = await agent.run_episode(
            session,
            self.policy.preset,
            self.policy.client,
            self.run_dir.path / "trajectories" / f"{slug}.jsonl",
            settings=settings,
            budgets=self.policy.budgets,
        )
        return f"the policy endpoint failed: {result.error}" if result.stop_reason == "endpoint_error" else ""

    def _journaled(self, session: Session, source_hash: str) -> EvalResult | None:
        """An evaluation of exactly this build, under these verdict rules, that a killed run of this
        session finished."""
        records = session.journal.records(
            session_id=session.id, rules_version=VERDICT_RULES_VERSION, limit=20
        )
        for record in records:
            done = record.kind == "evaluate" and record.status == "done" and record.result is not None
            if done and record.source_hash == source_hash:
                try:
                    return EvalResult.model_validate(record.result)
                except ValidationError:  # written by another version of the tools: measure again
                    return None
        return None

    async def _retrying(self, work: Callable[[], Awaitable[T]]) -> T:
        """Infrastructure failures are retried (doubling waits); candidate failures are results."""
        attempt = 0
        while True:
            try:
                return await work()
            except GpusDrained:
                raise
            except InfraError:
                attempt += 1
                if attempt > self.request.infra_retries:
                    raise
                await anyio.sleep(0.5 * 2 ** (attempt - 1))

    def emit(self, last: str) -> None:
        if self.progress is None:
            return
        rows = self.run_dir.rows.values()
        elapsed = time.monotonic() - self.started
        remaining = self.total - len(self.run_dir.rows)
        self.progress(
            SuiteProgress(
                done=len(self.run_dir.rows),
                total=self.total,
                resumed=self.resumed,
                correct=sum(1 for r in rows if r.outcome == "correct"),
                fast_1_compile=sum(
                    1 for r in rows if r.outcome == "correct" and (r.speedup_vs_compile or 0) > 1
                ),
                task_errors=sum(1 for r in rows if r.outcome == "task_error"),
                running=list(self.running),
                last=last,
                eta_s=round(elapsed / self.done_now * remaining, 1) if self.done_now else None,
            )
        )

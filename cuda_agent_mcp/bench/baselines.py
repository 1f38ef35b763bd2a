"""Baselines measured once: a task's eager and torch.compile times alone, and the committed tables of them.

`task_baselines` asks the judge for the reference's timings only (job mode `baselines`; the candidate is
never loaded), so a suite knows a failing task from a failing candidate: any failure here is the task's.
The judge keeps its own cache (`<cache>/baselines.json`, keyed by task hash, GPU and torch); a
`BaselineTable` is the committed, shareable form of it (`benchmarks/baselines/*.json`): one file per
GPU, driver, CUDA and torch, accumulated across sessions, written after every task. Before a run the
entries of the table matching this machine are put into the judge's cache, so nothing is measured twice.
Entries and failures carry the verdict rules version they were measured under; those of another version
(or of none: tables written before versions were recorded) are never used, only measured again.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import discover_toolchain
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.evaluation.job import TimingPolicy, baseline_cache_key
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import TimingStats, Verdict
from cuda_agent_mcp.tasks import Task
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.evaluate import run_judge
from cuda_agent_mcp.tools.gpu import gpu_specs

SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BaselineEnvironment(_Frozen):
    """What a table's timings depend on; a table is used only where all four match."""

    gpu: str
    driver: str
    cuda: str
    torch: str = Field(description="torch's version without its local suffix (2.11.0, not 2.11.0+cu128)")

    def slug(self) -> str:
        text = f"{self.gpu}_driver-{self.driver}_cuda-{self.cuda}_torch-{self.torch}"
        return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-").lower()


class BaselineEntry(_Frozen):
    task_id: str
    content_hash: str
    judge_gpu: str = Field(description="the GPU name the judge saw (part of its cache key)")
    judge_torch: str = Field(description="torch.__version__ in the judge (part of its cache key)")
    eager: TimingStats
    compiled: TimingStats
    measured_at: str
    rules_version: str | None = Field(
        default=None, description="the verdict rules it was timed under; None: before versions were recorded"
    )


class BaselineFailure(_Frozen):
    task_id: str
    content_hash: str
    message: str
    measured_at: str
    rules_version: str | None = Field(
        default=None, description="the verdict rules it failed under; None: before versions were recorded"
    )


class BaselineTable(_Frozen):
    schema_version: int = SCHEMA_VERSION
    environment: BaselineEnvironment
    entries: dict[str, BaselineEntry] = Field(default_factory=dict, description="by task id")
    failures: dict[str, BaselineFailure] = Field(
        default_factory=dict, description="tasks whose reference failed to run or time here"
    )


class BaselineResult(_Frozen):
    """One task's baselines: measured now, or from the cache."""

    verdict: Verdict = Field(description="passed, or how the reference itself failed (a task error)")
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    cached: bool = False
    gpu: str = ""
    environment: dict[str, str] = Field(default_factory=dict)
    wall_s: float


async def task_baselines(
    session: Session, *, device: str = "cuda", budget_s: float = 2.0, timeout_s: float = 900.0
) -> BaselineResult:
    """The eager and torch.compile timings of the session's task (cached per task, GPU and torch), in the
    journal as a `baselines` record."""
    started = time.monotonic()
    journal = session.journal
    record = journal.begin(
        kind="baselines", session_id=session.id, task_id=session.task.id, task_hash=session.task.content_hash
    )
    try:
        atol, rtol = session.task.policy.tolerance.atol, session.task.policy.tolerance.rtol
        report = await run_judge(
            session,
            lambda _candidate: None,  # nothing of a candidate is staged: the reference alone is timed
            mode="baselines",
            device=device,
            seeds=[session.draw_seed()],
            atol=atol,
            rtol=rtol,
            timeout_s=timeout_s,
            baselines="cached",
            timing=TimingPolicy(budget_s=budget_s),
        )
    except BaseException as exc:
        journal.fail(record, f"{type(exc).__name__}: {exc}")
        raise
    result = BaselineResult(
        verdict=report.verdict,
        eager=report.eager,
        compiled=report.compiled,
        cached=report.baselines_cached,
        gpu=report.gpu,
        environment=report.environment,
        wall_s=round(time.monotonic() - started, 3),
    )
    journal.finish(
        record, result, verdict=result.verdict.status, source_hash="", environment=result.environment
    )
    return result


def local_environment(device: str, cache_dir: Path | None = None) -> BaselineEnvironment | None:
    """This machine's table key, read without torch (nvidia-smi and torch's files); None when unknown."""
    try:
        toolchain = discover_toolchain(cache_dir)
    except CudaAgentError:
        return None
    torch_version = toolchain.torch_version.split("+")[0]
    if device == "cpu":
        return BaselineEnvironment(
            gpu="cpu", driver="", cuda=toolchain.torch_cuda_version, torch=torch_version
        )
    gpus = gpu_specs().gpus
    if not gpus:
        return None
    return BaselineEnvironment(
        gpu=gpus[0].name, driver=gpus[0].driver or "", cuda=toolchain.torch_cuda_version, torch=torch_version
    )


def table_path(directory: Path, environment: BaselineEnvironment) -> Path:
    return directory / f"{environment.slug()}.json"


def load_table(path: Path) -> BaselineTable:
    return BaselineTable.model_validate_json(path.read_text())


def load_tables(paths: list[Path]) -> list[BaselineTable]:
    """Every table in `paths` (files, or directories of *.json files), as written: entries and failures of
    other verdict rules are kept in the file but never used (`current`), so they are measured again."""
    files: list[Path] = []
    for path in paths:
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return [load_table(f) for f in files if f.is_file()]


def current(entry: BaselineEntry | BaselineFailure) -> bool:
    """Measured under this version's verdict rules: only such an entry is a cache hit or a known failure."""
    return entry.rules_version == VERDICT_RULES_VERSION


def matching(tables: list[BaselineTable], environment: BaselineEnvironment | None) -> list[BaselineTable]:
    return [t for t in tables if environment is not None and t.environment == environment]


def seed_judge_cache(tables: list[BaselineTable], tasks: list[Task], cache_dir: Path) -> int:
    """Put the tables' timings of `tasks` (same reference code) into the judge's baseline cache, where
    absent; returns how many were added."""
    by_hash = {t.content_hash: t for t in tasks}
    cache = cache_dir / "baselines.json"
    try:
        data = json.loads(cache.read_text())
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    added = 0
    for table in tables:
        for entry in table.entries.values():
            if entry.content_hash not in by_hash or not current(entry):
                continue
            key = baseline_cache_key(entry.content_hash, entry.judge_gpu, entry.judge_torch)
            if key not in data:
                data[key] = {"eager": entry.eager.model_dump(), "compiled": entry.compiled.model_dump()}
                added += 1
    if added:
        _write_json(cache, data)
    return added


def known_failures(tables: list[BaselineTable], tasks: list[Task]) -> dict[str, str]:
    """Task id -> why its baseline failed, for the tasks whose reference code a table recorded failing."""
    hashes = {t.id: t.content_hash for t in tasks}
    return {
        task_id: failure.message
        for table in tables
        for task_id, failure in table.failures.items()
        if hashes.get(task_id) == failure.content_hash and current(failure)
    }


class TableWriter:
    """Accumulates measurements into the table of one environment, rewriting the file after each."""

    def __init__(self, path: Path, environment: BaselineEnvironment) -> None:
        self.path = path
        self.table = load_table(path) if path.is_file() else BaselineTable(environment=environment)
        if self.table.environment != environment:
            raise CudaAgentError(f"{path} holds another environment's baselines")

    def has(self, task: Task) -> bool:
        """Measured already: the same reference, under these verdict rules (else it is measured again)."""
        entry = self.table.entries.get(task.id) or self.table.failures.get(task.id)
        return entry is not None and entry.content_hash == task.content_hash and current(entry)

    def record(self, task: Task, result: BaselineResult) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds")
        entries, failures = dict(self.table.entries), dict(self.table.failures)
        if result.verdict.status == "passed" and result.eager is not None and result.compiled is not None:
            entries[task.id] = BaselineEntry(
                task_id=task.id,
                content_hash=task.content_hash,
                judge_gpu=result.gpu,
                judge_torch=result.environment.get("torch", ""),
                eager=result.eager,
                compiled=result.compiled,
                measured_at=now,
                rules_version=VERDICT_RULES_VERSION,
            )
            failures.pop(task.id, None)
        else:
            message = getattr(result.verdict, "message", result.verdict.status)
            failures[task.id] = BaselineFailure(
                task_id=task.id,
                content_hash=task.content_hash,
                message=str(message)[:500],
                measured_at=now,
                rules_version=VERDICT_RULES_VERSION,
            )
            entries.pop(task.id, None)
        self.table = self.table.model_copy(
            update={"entries": dict(sorted(entries.items())), "failures": dict(sorted(failures.items()))}
        )
        _write_json(self.path, self.table.model_dump(mode="json"))


def _write_json(path: Path, data: object) -> None:
    """Atomically: a reader (or a killed writer) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(temporary, path)

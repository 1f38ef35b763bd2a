"""Measure the baseline table of a task set on this machine: resumable (tasks already in the table are
skipped) and written after every task, so a run cut short still leaves every measurement it made."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.bench.baselines import TableWriter, local_environment, table_path, task_baselines
from cuda_agent_mcp.bench.models import SuiteRequest
from cuda_agent_mcp.bench.selection import select_tasks
from cuda_agent_mcp.build import default_cache_dir
from cuda_agent_mcp.errors import CudaAgentError, GpusDrained, InfraError, UsageError
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tasks import Task, TaskCatalog
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.gpu import visible_gpu_scheduler


class BaselineRunProgress(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    done: int
    total: int
    skipped: int
    failed: int
    last: str = ""


class BaselineRun(BaseModel):
    """What a baseline measurement did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str
    selected: int
    already_in_table: int
    measured: int
    cached: int = Field(description="found in the judge's cache of this machine (measured earlier)")
    failed: list[str] = Field(description="tasks whose reference failed here (recorded as failures)")
    infra_errors: list[str]
    wall_s: float


async def measure_table(
    selection: SuiteRequest,
    table_dir: Path,
    *,
    catalog: TaskCatalog | None = None,
    scheduler: GpuScheduler | None = None,
    cache_dir: Path | None = None,
    progress: Callable[[BaselineRunProgress], None] | None = None,
) -> BaselineRun:
    """Baselines of every selected task not yet in this machine's table under `table_dir`."""
    started = time.monotonic()
    tasks = select_tasks(selection, catalog)
    cache = cache_dir or default_cache_dir()
    environment = local_environment(selection.device, cache)
    if environment is None:
        raise UsageError("no GPU visible (nvidia-smi lists none): baselines are measured where the GPU is")
    writer = TableWriter(table_path(table_dir, environment), environment)
    todo = [t for t in tasks if not writer.has(t)]
    if scheduler is None and selection.device == "cuda":
        scheduler = visible_gpu_scheduler()
    limit = anyio.CapacityLimiter(max(len(scheduler.status()) if scheduler else 1, 1))
    counts = {"measured": 0, "cached": 0}
    failed: list[str] = []
    infra: list[str] = []
    done = 0

    async def one(task: Task, root: Path) -> None:
        nonlocal done
        async with limit:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.id).strip("-")
            session = Session.create(task, root / slug, scheduler=scheduler, cache_dir=cache)
            try:
                result = await task_baselines(session, device=selection.device, budget_s=selection.budget_s)
            except GpusDrained:
                raise
            except (InfraError, CudaAgentError) as exc:
                infra.append(f"{task.id}: {exc}")
                result = None
            finally:
                shutil.rmtree(session.workspace.root, ignore_errors=True)
        if result is not None:
            writer.record(task, result)
            if result.verdict.status != "passed":
                failed.append(task.id)
            else:
                counts["cached" if result.cached else "measured"] += 1
        done += 1
        if progress is not None:
            progress(
                BaselineRunProgress(
                    done=done,
                    total=len(todo),
                    skipped=len(tasks) - len(todo),
                    failed=len(failed),
                    last=task.id,
                )
            )

    with tempfile.TemporaryDirectory(prefix="cuda-agent-baselines-") as tmp:
        async with anyio.create_task_group() as group:
            for task in todo:
                group.start_soon(one, task, Path(tmp))
    return BaselineRun(
        table=str(writer.path),
        selected=len(tasks),
        already_in_table=len(tasks) - len(todo),
        measured=counts["measured"],
        cached=counts["cached"],
        failed=sorted(failed),
        infra_errors=infra,
        wall_s=round(time.monotonic() - started, 1),
    )

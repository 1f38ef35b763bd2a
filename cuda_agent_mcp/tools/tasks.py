"""Task tools: list the catalog, show one task, lay out a workspace for one."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import ProbeReport, Task, TaskCatalog, TaskSummary, probe_task
from cuda_agent_mcp.tools.rules import TaskRules, skill_section, task_rules
from cuda_agent_mcp.workspace import Workspace


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskQuery(_Model):
    level: int | None = Field(default=None, ge=1)
    contains: str | None = Field(default=None, description="substring of the id or name, case-insensitive")
    limit: int | None = Field(default=None, ge=1)


class TaskList(_Model):
    tasks: list[TaskSummary]
    total: int = Field(description="matches before the limit")
    sources: list[str]


class TaskDetails(_Model):
    task: Task
    probe: ProbeReport | None = Field(
        default=None, description="what the entry points returned, on the meta device"
    )
    vendor_libraries: tuple[str, ...] = Field(
        default=(),
        description="vendor libraries a candidate may call for this task (cublas, cudnn), by its policy",
    )
    rules: TaskRules | None = Field(
        default=None, description="what a candidate must satisfy: tolerance, precision, hidden sizes"
    )


class WorkspaceInfo(_Model):
    task_id: str
    path: str
    files: list[str]
    language: KernelLanguage = Field(
        default="cuda", description="what the workspace's kernels are written in"
    )


async def list_tasks(catalog: TaskCatalog, query: TaskQuery | None = None) -> TaskList:
    query = query or TaskQuery()
    matches = catalog.list(level=query.level, contains=query.contains)
    shown = matches[: query.limit] if query.limit else matches
    return TaskList(
        tasks=[TaskSummary.of(t) for t in shown], total=len(matches), sources=catalog.describe_sources()
    )


async def show_task(catalog: TaskCatalog, task_id: str, *, inspect: bool = True) -> TaskDetails:
    """One task with its code; with `inspect`, also run its entry points (in a child process, on meta)."""
    task = catalog.get(task_id)
    probe = await probe_task(task) if inspect else None
    return TaskDetails(
        task=task, probe=probe, vendor_libraries=task.vendor_libraries, rules=task_rules(task, probe)
    )


async def new_workspace(
    catalog: TaskCatalog,
    task_id: str,
    directory: str | Path,
    *,
    overwrite: bool = False,
    language: KernelLanguage = "cuda",
) -> WorkspaceInfo:
    """Check the task runs, then lay out its workspace for kernels in `language`; its SKILL.md ends with
    this task's rules."""
    task = catalog.get(task_id)
    probe = await probe_task(task)
    guide = skill_section(task, task_rules(task, probe))
    workspace = Workspace.create(task, directory, overwrite=overwrite, guide=guide, language=language)
    files = sorted(p.relative_to(workspace.root).as_posix() for p in workspace.root.rglob("*") if p.is_file())
    return WorkspaceInfo(task_id=task.id, path=str(workspace.root), files=files, language=language)

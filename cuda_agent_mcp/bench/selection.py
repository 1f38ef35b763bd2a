"""Which tasks a suite request selects, in order; unknown ids and empty selections are refused up front."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_mcp.bench.models import SuiteRequest
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.tasks import Task, TaskCatalog


def select_tasks(request: SuiteRequest, catalog: TaskCatalog | None = None) -> list[Task]:
    """The request's sources (or, without any, the whole catalog), filtered by ids, levels, a substring
    and a limit."""
    if catalog is None:
        catalog = (
            TaskCatalog([Path(s) for s in request.sources], include_bundled=False)
            if request.sources
            else TaskCatalog.from_environment()
        )
    tasks = catalog.list()
    if request.ids:
        by_id = {t.id: t for t in tasks}
        unknown = [i for i in request.ids if i not in by_id]
        if unknown:
            shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            raise UsageError(
                f"unknown task ids: {shown} (task sources: {', '.join(catalog.describe_sources())})"
            )
        tasks = [by_id[i] for i in dict.fromkeys(request.ids)]
    if request.levels:
        tasks = [t for t in tasks if t.level in request.levels]
    if request.contains:
        needle = request.contains.lower()
        tasks = [t for t in tasks if needle in t.id.lower() or needle in t.name.lower()]
    if request.limit is not None:
        tasks = tasks[: request.limit]
    if not tasks:
        raise UsageError("no task matches the selection (check --tasks, --level, --id and --contains)")
    return tasks

"""Load one reference program from a `.py` file or from source text."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.tasks.model import Task, TaskPolicy, TaskSource, content_hash
from cuda_agent_mcp.tasks.static_check import check_reference_source, guess_dtype


def read_source(path: Path) -> str:
    """Read a reference file as UTF-8, with a TaskLoadError for every way that can fail."""
    if not path.exists():
        raise TaskLoadError(path, "no such file")
    if path.is_dir():
        raise TaskLoadError(path, "is a directory, not a .py file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskLoadError(path, "is not UTF-8 text") from None
    except OSError as exc:
        raise TaskLoadError(path, f"cannot be read: {exc.strerror}") from None


def task_from_source(
    code: str,
    *,
    task_id: str,
    name: str,
    source: TaskSource,
    location: str,
    level: int | None = None,
    tags: dict[str, str] | None = None,
) -> Task:
    """Build a Task from reference source text after checking its shape."""
    tree = check_reference_source(code, location)
    return Task(
        id=task_id,
        name=name,
        level=level,
        source=source,
        code=code,
        content_hash=content_hash(code),
        policy=TaskPolicy(dtype=guess_dtype(tree)),
        tags=tags or {},
    )


def load_task_file(path: str | Path, *, task_id: str | None = None) -> Task:
    """Load one KernelBench-format `.py` file. The id defaults to `file/<stem>`."""
    path = Path(path)
    if path.suffix != ".py" and not path.is_dir():
        raise TaskLoadError(path, "a task file must be a .py file")
    code = read_source(path)
    return task_from_source(
        code,
        task_id=task_id or f"file/{path.stem}",
        name=path.stem,
        source=TaskSource(kind="file", path=str(path.resolve())),
        location=str(path),
    )

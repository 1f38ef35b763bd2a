"""Find tasks by id across configured sources: the bundled examples, KernelBench trees, datasets, files."""

from __future__ import annotations

import builtins
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from cuda_agent_mcp.errors import TaskLoadError, TaskNotFound
from cuda_agent_mcp.tasks.dataset import load_dataset
from cuda_agent_mcp.tasks.fetch import fetched_tree
from cuda_agent_mcp.tasks.kernelbench import is_kernelbench_tree, load_kernelbench
from cuda_agent_mcp.tasks.model import Task, TaskSource
from cuda_agent_mcp.tasks.single_file import load_task_file, read_source, task_from_source

TASKS_ENV = "CUDA_AGENT_TASKS"
DATASET_SUFFIXES = (".jsonl", ".ndjson", ".parquet")


def bundled_examples_dir() -> Path | None:
    """The example tasks shipped with the package (wheel), or the repo's examples/ (editable install)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_bundled_examples", package.parent / "examples"):
        if candidate.is_dir():
            return candidate
    return None


def load_example_dir(root: Path, *, prefix: str) -> list[Task]:
    """Each subdirectory holding a model.py is one task, id `<prefix>/<subdirectory>`."""
    tasks = []
    for child in sorted(root.iterdir()):
        model = child / "model.py"
        if child.is_dir() and model.is_file():
            tasks.append(
                task_from_source(
                    read_source(model),
                    task_id=f"{prefix}/{child.name}",
                    name=child.name,
                    source=TaskSource(kind="file", path=str(model.resolve())),
                    location=str(model),
                )
            )
    return tasks


def load_source(path: Path) -> list[Task]:
    """Load whatever `path` is: a .py file, a dataset file, a KernelBench tree or a directory of examples."""
    if path.is_file() and path.suffix == ".py":
        return [load_task_file(path)]
    if path.is_file() and path.suffix in DATASET_SUFFIXES:
        return load_dataset(path)
    if is_kernelbench_tree(path):
        return load_kernelbench(path)
    if path.is_dir():
        tasks = load_example_dir(path, prefix=path.name)
        if tasks:
            return tasks
        raise TaskLoadError(path, "holds no tasks (no levelN/ folders and no subfolders with a model.py)")
    if not path.exists():
        raise TaskLoadError(path, "no such file or directory")
    raise TaskLoadError(path, "not a task source (.py file, .jsonl/.parquet dataset, or a directory)")


class TaskCatalog:
    """All tasks from a list of sources, loaded on first use. Later sources win on duplicate ids."""

    def __init__(self, sources: Sequence[str | Path] = (), *, include_bundled: bool = True) -> None:
        self.sources = [Path(s) for s in sources]
        self.include_bundled = include_bundled

    @classmethod
    def from_environment(cls, extra: Sequence[str | Path] = ()) -> TaskCatalog:
        """The bundled examples, then KernelBench where `cuda-agent tasks fetch` puts it (if it is there),
        then the sources in $CUDA_AGENT_TASKS (os.pathsep-separated), then `extra`."""
        configured = [p for p in os.environ.get(TASKS_ENV, "").split(os.pathsep) if p]
        fetched = fetched_tree()
        return cls([*([fetched] if fetched else []), *configured, *extra])

    @cached_property
    def _tasks(self) -> dict[str, Task]:
        tasks: dict[str, Task] = {}
        bundled = bundled_examples_dir() if self.include_bundled else None
        if bundled is not None:
            for task in load_example_dir(bundled, prefix="examples"):
                tasks[task.id] = task
        for source in self.sources:
            for task in load_source(source):
                tasks[task.id] = task
        return tasks

    def list(self, *, level: int | None = None, contains: str | None = None) -> list[Task]:
        """Tasks in source order, optionally filtered by level and by a substring of the id or name."""
        needle = contains.lower() if contains else None
        return [
            t
            for t in self._tasks.values()
            if (level is None or t.level == level)
            and (needle is None or needle in t.id.lower() or needle in t.name.lower())
        ]

    def get(self, ref: str) -> Task:
        """A task by id, or by the path of a .py file."""
        if ref in self._tasks:
            return self._tasks[ref]
        path = Path(ref)
        if path.suffix == ".py" and path.is_file():
            return load_task_file(path)
        raise TaskNotFound(ref, self.describe_sources())

    def describe_sources(self) -> builtins.list[str]:  # `list` is a method here
        names = ["bundled examples"] if self.include_bundled and bundled_examples_dir() else []
        return names + [str(s) for s in self.sources]

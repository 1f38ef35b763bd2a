"""Load a KernelBench tree: `levelN/<number>_<Name>.py` files, ids like `kernelbench/level1/19`."""

from __future__ import annotations

import re
from pathlib import Path

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.tasks.model import Task, TaskSource
from cuda_agent_mcp.tasks.single_file import read_source, task_from_source

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_PROBLEM_FILE = re.compile(r"^(\d+)_(.+)\.py$")


def is_kernelbench_tree(root: Path) -> bool:
    """True when `root` holds at least one `levelN/` directory."""
    return root.is_dir() and any(_LEVEL_DIR.match(p.name) and p.is_dir() for p in root.iterdir())


def load_kernelbench(root: str | Path, *, prefix: str = "kernelbench") -> list[Task]:
    """Every problem of the tree, ordered by level then problem number."""
    root = Path(root)
    if not is_kernelbench_tree(root):
        raise TaskLoadError(root, "not a KernelBench tree (expected level1/, level2/, ... directories)")
    tasks: list[Task] = []
    for level_dir in sorted(root.iterdir(), key=lambda p: p.name):
        level_match = _LEVEL_DIR.match(level_dir.name)
        if not level_match or not level_dir.is_dir():
            continue
        level = int(level_match.group(1))
        problems: list[tuple[int, str, Path]] = []
        for path in level_dir.glob("*.py"):
            match = _PROBLEM_FILE.match(path.name)
            if match is None:
                raise TaskLoadError(path, "a KernelBench problem file must be named <number>_<Name>.py")
            problems.append((int(match.group(1)), match.group(2), path))
        for number, name, path in sorted(problems):
            tasks.append(
                task_from_source(
                    read_source(path),
                    task_id=f"{prefix}/level{level}/{number}",
                    name=name.strip("_"),
                    level=level,
                    source=TaskSource(kind="kernelbench", path=str(path.resolve())),
                    location=str(path),
                )
            )
    return tasks

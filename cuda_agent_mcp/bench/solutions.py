"""Where each task's solution is, and what its files are (solutions are hostile input: names and sizes are
checked, links are not followed, nothing is executed here).

A directory of workspaces holds one workspace per task, found by any of:
    <root>/<task id>/                     e.g. kernelbench/level1/19/ (nested, as the id reads)
    <root>/<task id with / as __>/        kernelbench__level1__19/
    <root>/level<L>/<N>/  or  <root>/level<L>/<N>_<Name>/   (KernelBench tasks)
each with model_new.py and kernels/. A directory of KernelBench single-file solutions holds one .py per
task: <root>/<task id>.py, <root>/level<L>/<N>.py, <root>/level<L>/<N>_<Name>.py, or KernelBench's own
run naming, <root>/level_<L>_problem_<N>_sample_0_kernel.py.

A workspace solution's kernel language is the one its `.cuda-agent/workspace.json` records (as
`Workspace.open` reads it: no "language" field is cuda), else the tree's (`SolutionSpec.language`,
`bench run --language`). A KernelBench single file is Triton where it imports triton, else CUDA
(load_inline).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from cuda_agent_mcp.bench.kernelbench_import import solution_language as single_file_code_language
from cuda_agent_mcp.bench.models import SolutionSpec
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import Task
from cuda_agent_mcp.workspace import (
    GENERATED_MODULE,
    HARNESS_FILES,
    LANGUAGES,
    REFERENCE_FILE,
    recorded_language,
)

MAX_FILE_BYTES = 1 << 20
MAX_FILES = 64
_KERNELBENCH_ID = re.compile(r"level(\d+)/(\d+)$")
_SOURCE_SUFFIXES = (".py", ".cu", ".cpp", ".cc", ".cxx", ".h", ".cuh", ".hpp", ".hh", ".inl")


def kernelbench_number(task: Task) -> tuple[int, int] | None:
    """(level, problem number) of a KernelBench task id, e.g. kernelbench/level1/19 -> (1, 19)."""
    match = _KERNELBENCH_ID.search(task.id)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _problem_stem(task: Task) -> str | None:
    return Path(task.source.path).stem if task.source.kind == "kernelbench" and task.source.path else None


def workspace_candidates(root: Path, task: Task) -> list[Path]:
    paths = [root / task.id, root / task.id.replace("/", "__")]
    if (number := kernelbench_number(task)) is not None:
        level, problem = number
        paths.append(root / f"level{level}" / str(problem))
        if (stem := _problem_stem(task)) is not None:
            paths.append(root / f"level{level}" / stem)
    return paths


def single_file_candidates(root: Path, task: Task) -> list[Path]:
    paths = [root / f"{task.id}.py", root / f"{task.id.replace('/', '__')}.py"]
    if (number := kernelbench_number(task)) is not None:
        level, problem = number
        paths += [
            root / f"level{level}" / f"{problem}.py",
            root / f"level_{level}_problem_{problem}_sample_0_kernel.py",
        ]
        if (stem := _problem_stem(task)) is not None:
            paths.append(root / f"level{level}" / f"{stem}.py")
    return paths


SINGLE_FILE_LANGUAGES: tuple[KernelLanguage, ...] = ("cuda", "triton")


def check_language(spec: SolutionSpec) -> None:
    """KernelBench single files are CUDA (load_inline) or Triton (@triton.jit kernels): a CuPy solution
    needs a workspace (its kernels/*.cu beside model_new.py)."""
    if spec.kind == "kernelbench" and spec.language not in SINGLE_FILE_LANGUAGES:
        raise UsageError(
            f"KernelBench single-file solutions are CUDA (load_inline) or Triton; --language {spec.language} "
            "is for workspace solutions and policy runs"
        )


def single_file_language(path: Path, default: KernelLanguage) -> KernelLanguage:
    """The kernel language of a KernelBench single file: triton where it imports triton, else cuda; the
    tree's `default` where it cannot be read (its import then fails and says why)."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_FILE_BYTES:
            return default
        code = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return default
    return single_file_code_language(code)


def solution_language(directory: Path, default: KernelLanguage) -> KernelLanguage:
    """The kernel language of a workspace solution: its `.cuda-agent/workspace.json`'s, else `default`.
    A record that cannot be read is the solution's failure (UsageError), never a silent guess: the
    solution would be built as another language."""
    meta = directory / ".cuda-agent" / "workspace.json"
    if not meta.exists() and not meta.is_symlink():
        return default
    if meta.is_symlink() or not meta.is_file() or meta.stat().st_size > MAX_FILE_BYTES:
        raise UsageError(f"{meta}: not a plain file of at most 1 MiB")
    try:
        value = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{meta} cannot be read as JSON ({exc})") from None
    language = recorded_language(value)
    if language is None:
        named = value.get("language") if isinstance(value, dict) else None
        raise UsageError(
            f"{meta}: the kernel language {named!r} is not one of {', '.join(LANGUAGES)} (a JSON object "
            'with "language")'
        )
    return language


def find_solutions(spec: SolutionSpec, tasks: list[Task]) -> tuple[dict[str, Path], list[str]]:
    """task id -> its solution's path (absent: none found), and the solutions found for no task."""
    if spec.kind == "policy":
        return {}, []
    if spec.path is None:
        raise UsageError(f"{spec.kind} solutions need a directory (--solutions DIR)")
    root = Path(spec.path)
    if not root.is_dir():
        raise UsageError(f"{root}: no such solutions directory")
    found: dict[str, Path] = {}
    for task in tasks:
        if spec.kind == "workspaces":
            hits = [
                p
                for p in workspace_candidates(root, task)
                if (p / "model_new.py").is_file() and not p.is_symlink()
            ]
        else:
            hits = [p for p in single_file_candidates(root, task) if p.is_file() and not p.is_symlink()]
        if hits:
            found[task.id] = hits[0]
    used = {p.resolve() for p in found.values()}
    if spec.kind == "workspaces":
        present = {
            p.parent.resolve() for p in root.glob("**/model_new.py") if len(p.relative_to(root).parts) <= 5
        }
    else:
        present = {p.resolve() for p in root.glob("**/*.py") if len(p.relative_to(root).parts) <= 4}
    ignored = sorted(str(p.relative_to(root.resolve())) for p in present - used)
    return found, ignored


def workspace_files(directory: Path) -> dict[str, str]:
    """The editable files of a workspace solution: model_new.py, other root Python and C++ files and
    everything under kernels/ (the reference and the harness files are the evaluator's, and a CuPy
    build's generated cuda_extension.py the build's: never taken)."""
    files: dict[str, str] = {}
    candidates = [p for p in sorted(directory.iterdir()) if p.is_file()]
    kernels = directory / "kernels"
    if kernels.is_dir() and not kernels.is_symlink():
        candidates += [p for p in sorted(kernels.rglob("*")) if p.is_file()]
    for path in candidates:
        relative = path.relative_to(directory).as_posix()
        if (
            path.is_symlink()
            or path.suffix not in _SOURCE_SUFFIXES
            or any(part.startswith(".") for part in relative.split("/"))
        ):
            continue
        if relative in (REFERENCE_FILE, GENERATED_MODULE, *HARNESS_FILES):
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: solution files are limited to 1 MiB")
        files[relative] = path.read_text(encoding="utf-8", errors="replace")
        if len(files) > MAX_FILES:
            raise UsageError(f"{directory}: more than {MAX_FILES} solution files")
    return files


def digest(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return h.hexdigest()

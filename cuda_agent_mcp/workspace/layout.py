"""An agent workspace on disk, in the CUDA Agent paper's layout, and what its build inputs are.

model.py               reference (read-only; the pristine copy is kept in memory)
model_new.py           agent: class ModelNew
kernels/*.cu           agent: pure CUDA + extern "C" launchers
kernels/*_binding.cpp  agent: torch tensors -> pointers, REGISTER_BINDING
binding.cpp            harness (ignored if edited)
binding_registry.h     harness (ignored if edited)
.cuda-agent/           provenance: which task this workspace was made from, in which kernel language

A CuPy workspace (`language="cupy"`) has no host code and no harness files: kernels/*.cu are device code
that NVRTC compiles, and model_new.py launches them through the generated `cuda_extension` module.
A Triton workspace (`language="triton"`) has neither: its kernels are `@triton.jit` functions in
model_new.py and the Python modules beside it (`python_sources`), which the build compiles.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, get_args

from cuda_agent_mcp.errors import WorkspaceError
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import Task, TaskSource, task_from_source
from cuda_agent_mcp.tasks.static_check import check_reference_source, model_init_signature
from cuda_agent_mcp.workspace.harness import GENERATED_MODULE, HARNESS_FILES, harness_text

REFERENCE_FILE = "model.py"
CANDIDATE_FILE = "model_new.py"
KERNELS_DIR = "kernels"
META_DIR = ".cuda-agent"
PROTECTED_FILES = (REFERENCE_FILE, *HARNESS_FILES)
SOURCE_SUFFIXES: dict[str, Literal["cu", "cpp"]] = {".cu": "cu", ".cpp": "cpp", ".cc": "cpp", ".cxx": "cpp"}
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hh", ".inl")

SourceKind = Literal["cu", "cpp"]
LANGUAGES: tuple[KernelLanguage, ...] = get_args(KernelLanguage)
# Where each language's SKILL.md and model_new.py template live among the pristine files.
LANGUAGE_FILES: dict[KernelLanguage, PurePosixPath] = {
    "cuda": PurePosixPath(),
    "cupy": PurePosixPath("cupy"),
    "triton": PurePosixPath("triton"),
}


@dataclass(frozen=True)
class SourceFile:
    """One translation unit of the build, with the hash of its bytes."""

    relpath: str
    kind: SourceKind
    sha256: str


class Workspace:
    """A directory an agent works in, tied to the reference it was opened with."""

    def __init__(
        self, root: Path, reference_code: str, task_id: str, language: KernelLanguage = "cuda"
    ) -> None:
        self.root = root
        self.reference_code = reference_code
        self.task_id = task_id
        self.language: KernelLanguage = language

    @property
    def harness_files(self) -> tuple[str, ...]:
        """The pristine files this workspace's language lays out (a CuPy workspace has none)."""
        return HARNESS_FILES if self.language == "cuda" else ()

    # -- creation -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        task: Task,
        directory: str | Path,
        *,
        overwrite: bool = False,
        guide: str | None = None,
        language: KernelLanguage = "cuda",
    ) -> Workspace:
        """Lay out a fresh workspace for `task` in `directory` (which must be empty unless overwrite),
        in `language`; `guide` (this task's rules) is appended to SKILL.md."""
        root = Path(directory).resolve()
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"{root} exists and is not a directory")
        if root.exists() and any(root.iterdir()) and not overwrite:
            raise WorkspaceError(
                f"{root} is not empty: choose an empty directory, or lay the workspace out over it with "
                "--overwrite (overwrite=true through the tools)"
            )
        root.mkdir(parents=True, exist_ok=True)
        if language != "triton":  # a Triton workspace's kernels are Python beside model_new.py
            (root / KERNELS_DIR).mkdir(exist_ok=True)
        _write_readonly(root / REFERENCE_FILE, task.code)
        pristine = LANGUAGE_FILES[language]
        for name in HARNESS_FILES if language == "cuda" else ():
            _write_readonly(root / name, harness_text(name))
        (root / "SKILL.md").write_text(harness_text(pristine / "SKILL.md") + (f"\n{guide}" if guide else ""))
        candidate = root / CANDIDATE_FILE
        if not candidate.exists():
            signature = model_init_signature(check_reference_source(task.code, task.id))
            parameters = f"self, {signature}" if signature else "self"
            template = harness_text(pristine / "model_new.py.template")
            candidate.write_text(template.replace("{parameters}", parameters))
        meta = {
            "task_id": task.id,
            "content_hash": task.content_hash,
            "source": task.source.model_dump(),
            "language": language,
        }
        (root / META_DIR).mkdir(exist_ok=True)
        (root / META_DIR / "workspace.json").write_text(json.dumps(meta, indent=2) + "\n")
        return cls(root, task.code, task.id, language)

    @classmethod
    def open(cls, directory: str | Path) -> Workspace:
        """Use an existing directory; its model.py at this moment becomes the reference."""
        root = Path(directory).resolve()
        if not root.is_dir():
            raise WorkspaceError(f"{root} is not a directory")
        model = root / REFERENCE_FILE
        if not model.is_file():
            raise WorkspaceError(f"{root} has no {REFERENCE_FILE}: not a workspace")
        code = model.read_text(encoding="utf-8")
        recorded = _recorded_meta(root)
        task_id = recorded.task_id or f"workspace/{root.name}"
        check_reference_source(code, str(model))
        return cls(root, code, task_id, recorded.language)

    def task(self) -> Task:
        """The reference of this workspace as a Task."""
        return task_from_source(
            self.reference_code,
            task_id=self.task_id,
            name=self.root.name,
            source=TaskSource(kind="workspace", path=str(self.root)),
            location=str(self.root / REFERENCE_FILE),
        )

    # -- build inputs -------------------------------------------------------------------------

    def build_sources(self) -> list[SourceFile]:
        """The agent's translation units: *.cu/*.cpp at the root and in kernels/ (harness files excluded;
        a CuPy workspace's C++ units are listed too, so its build can refuse them by name)."""
        return [
            SourceFile(path.relative_to(self.root).as_posix(), SOURCE_SUFFIXES[path.suffix], _sha256(path))
            for path in self._files_in_build_dirs()
            if path.suffix in SOURCE_SUFFIXES and path.name not in self.harness_files
        ]

    def python_files(self) -> list[Path]:
        """The candidate's Python modules: what a Triton workspace's build compiles and what the
        evaluation stages. Regular files at the root only (a symlink planted by a `run` command would make
        a copy read what it points to, anywhere the tool may read), never the reference or the generated
        module."""
        return sorted(
            path
            for path in self.root.glob("*.py")
            if path.name not in (REFERENCE_FILE, GENERATED_MODULE)
            and path.is_file()
            and not path.is_symlink()
        )

    def python_sources(self) -> dict[str, str]:
        """`python_files`, name -> sha256."""
        return {path.name: _sha256(path) for path in self.python_files()}

    def build_headers(self) -> dict[str, str]:
        """Local headers a translation unit may include, relpath -> sha256 (harness header excluded)."""
        return {
            path.relative_to(self.root).as_posix(): _sha256(path)
            for path in self._files_in_build_dirs()
            if path.suffix in HEADER_SUFFIXES and path.name not in self.harness_files
        }

    def modified_protected_files(self) -> list[str]:
        """Protected files present in the workspace whose content differs from the pristine copy (the
        build and the evaluator ignore them; a missing harness file is no problem, its copy is used)."""
        pristine = {REFERENCE_FILE: self.reference_code} | {n: harness_text(n) for n in self.harness_files}
        changed = []
        for name, text in pristine.items():
            path = self.root / name
            if not path.exists():
                continue
            try:
                if path.read_text(encoding="utf-8") != text:
                    changed.append(name)
            except (OSError, UnicodeDecodeError):
                changed.append(name)
        return changed

    def _files_in_build_dirs(self) -> list[Path]:
        found: list[Path] = []
        for directory in (self.root, self.root / KERNELS_DIR):
            if directory.is_dir():
                found.extend(p for p in sorted(directory.iterdir()) if p.is_file() and not p.is_symlink())
        return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_readonly(path: Path, text: str) -> None:
    if path.exists():
        path.chmod(stat.S_IWUSR | stat.S_IRUSR)
    path.write_text(text)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


@dataclass(frozen=True)
class _Recorded:
    task_id: str | None
    language: KernelLanguage


def _recorded_meta(root: Path) -> _Recorded:
    """The task id and language recorded when the workspace was laid out; no task id (and CUDA) where
    nothing was recorded (a folder opened in place). A record that cannot be read is an error, never
    ignored: the workspace would be judged as another task, or built as another language."""
    meta = root / META_DIR / "workspace.json"
    repair = (
        f"delete it (the workspace then counts as its own task, workspace/{root.name}), restore it, or "
        "lay the workspace out again with `cuda-agent workspace new TASK DIR --overwrite`"
    )
    try:
        text = meta.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _Recorded(None, "cuda")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkspaceError(f"{meta} cannot be read ({exc}): {repair}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkspaceError(
            f"{meta} is not valid JSON (line {exc.lineno} col {exc.colno}): {repair}"
        ) from None
    task_id = value.get("task_id") if isinstance(value, dict) else None
    if not isinstance(task_id, str) or not task_id:
        raise WorkspaceError(f"{meta} has no task_id (a JSON object with a string task_id): {repair}")
    language = recorded_language(value)
    if language is None:
        raise WorkspaceError(
            f"{meta} names the kernel language {value.get('language')!r}; this version knows "
            f"{', '.join(LANGUAGES)}: {repair}"
        )
    return _Recorded(task_id, language)


def recorded_language(record: object) -> KernelLanguage | None:
    """The language a workspace record (`.cuda-agent/workspace.json`, parsed) names: cuda where it names
    none, None where it is not a JSON object or names a language this version does not know."""
    language = record.get("language", "cuda") if isinstance(record, dict) else None
    return next((known for known in LANGUAGES if known == language), None)


__all__ = [
    "CANDIDATE_FILE",
    "KERNELS_DIR",
    "LANGUAGES",
    "PROTECTED_FILES",
    "REFERENCE_FILE",
    "SourceFile",
    "Workspace",
    "recorded_language",
]

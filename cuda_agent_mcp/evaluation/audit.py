"""Static audit of a workspace (principle 8): what the rules forbid, found in the sources before anything
runs, on meaning rather than names (`audit_python.py`, `audit_native.py`).

Static checks are bypassable on their own (a name can be bound in many ways); they catch what they can
early and cheaply, each finding with its file, line, rule and a message the model can act on. The
judge's checks on outputs and clocks, and the runtime op audit, stay the evidence that decides.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

from cuda_agent_mcp.evaluation.audit_native import ALLOWED_CPP_TORCH, audit_native
from cuda_agent_mcp.evaluation.audit_python import ALLOWED_TENSOR_METHODS, audit_python
from cuda_agent_mcp.evaluation.python_names import ALLOWED_TORCH_CALLS, ModuleNames
from cuda_agent_mcp.evaluation.triton_rules import kernel_names
from cuda_agent_mcp.results import AuditFinding, KernelLanguage

__all__ = [
    "ALLOWED_CPP_TORCH",
    "ALLOWED_TENSOR_METHODS",
    "ALLOWED_TORCH_CALLS",
    "audit_cpp",
    "audit_model_new",
    "audit_workspace",
]

_NATIVE_SUFFIXES = {".cu": False, ".cpp": True, ".cc": True, ".cxx": True}  # suffix -> host code
_HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hh", ".inl")
# The harness's files, the reference, and a CuPy workspace's generated module (the build's: the
# evaluation stages the build cache's copy, never this one).
_HARNESS = ("binding.cpp", "binding_registry.h", "model.py", "cuda_extension.py")


def audit_workspace(
    root: Path,
    allowed_libraries: Collection[str] = (),
    extension_kernels: Collection[str] | None = None,
    language: KernelLanguage = "cuda",
) -> list[AuditFinding]:
    """Findings over every Python module the candidate ships (model_new.py and the modules beside it)
    and every kernel source and header; an empty list means nothing was found. `allowed_libraries`
    (cublas, cudnn) may be used, by the task's policy; `extension_kernels`: a CuPy workspace's built
    kernels, the only attributes of its cuda_extension the candidate may use; `language`: the
    workspace's (a Triton workspace may use Triton's kernel language, and launch its kernels only)."""
    findings: list[AuditFinding] = [
        AuditFinding(
            file=path.relative_to(root).as_posix(),
            line=None,
            rule="linked_file",
            message="is a symbolic link: the candidate's files must be regular files of the workspace "
            "(a link would bring another file to the judge unaudited); copy the file in",
        )
        for path in _links(root)
    ]
    modules = {path.name: _read(path) for path in _files(root, ("*.py",))}
    kernels = _triton_kernels(modules) if language == "triton" else frozenset()
    for name, text in modules.items():
        findings += audit_python(
            text,
            name,
            candidate=name == "model_new.py",
            extension_kernels=extension_kernels,
            language=language,
            triton_kernels=kernels,
        )
    for path in _files(root, ("*", "kernels/*")):
        relpath = path.relative_to(root).as_posix()
        if path.suffix in _NATIVE_SUFFIXES:
            findings += audit_native(
                _read(path), relpath, allowed_libraries, host_code=_NATIVE_SUFFIXES[path.suffix]
            )
        elif path.suffix in _HEADER_SUFFIXES:
            findings += audit_native(_read(path), relpath, allowed_libraries, host_code=True)
    return findings


def _triton_kernels(modules: dict[str, str]) -> frozenset[str]:
    """Every module's `@triton.jit` function names: a kernel may be launched from another module."""
    found: set[str] = set()
    for text in modules.values():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        found.update(kernel_names(tree, ModuleNames(tree).resolve))
    return frozenset(found)


def audit_model_new(source: str, file: str) -> list[AuditFinding]:
    return audit_python(source, file, candidate=True)


def audit_cpp(source: str, file: str, allowed_libraries: Collection[str] = ()) -> list[AuditFinding]:
    return audit_native(source, file, allowed_libraries, host_code=not file.endswith(".cu"))


def _files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    """Regular files (not links: the build refuses those) matching `patterns`, harness files excepted."""
    found = {p for pattern in patterns for p in root.glob(pattern)}
    return sorted(p for p in found if p.is_file() and not p.is_symlink() and p.name not in _HARNESS)


def _links(root: Path) -> list[Path]:
    """Links where the candidate's modules and sources are taken from (the evaluation copies `*.py`)."""
    found = {p for pattern in ("*", "kernels/*") for p in root.glob(pattern) if p.is_symlink()}
    wanted = (".py", *_NATIVE_SUFFIXES, *_HEADER_SUFFIXES)
    return sorted(p for p in found if p.suffix in wanted and p.name not in _HARNESS)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""

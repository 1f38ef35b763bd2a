"""The Triton language's build: the workspace's `@triton.jit` kernels compiled for the GPU, before any
evaluation, in the same confined view as nvcc.

`triton_compile.py` runs in staging, imports the candidate's modules, records every launch `ModelNew`
makes on the meta device and compiles each for the target (Triton compiles sm_90 on a machine without a
GPU). The module it builds is the candidate's own Python, so nothing is generated: the evaluation
stages the workspace's modules and the worker's Triton compiles them again into its own private cache
at the first (untimed) call, so no compiled kernel, autotuning result or timing is carried from one
evaluation to another.

That script runs candidate code, so this side trusts none of its claims that matter: the kernel names
the judge credits are read here from the sources (functions decorated with `triton.jit`), registers
from the cubins it wrote; only its diagnostics (errors placed at file:line) and shared-memory figures
are passed on as it reported them.
"""

from __future__ import annotations

import ast
import sys
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from cuda_agent_mcp.build.cubin import register_counts
from cuda_agent_mcp.errors import ToolchainMissing
from cuda_agent_mcp.evaluation.kernel_names import library_lookalike
from cuda_agent_mcp.results import Diagnostic, KernelResources, Severity

COMPILE_SCRIPT = Path(__file__).resolve().with_name("triton_compile.py")
REFERENCE_NAME = ".reference.py"  # staged beside the candidate's modules; a dotfile no workspace file can be
OUTPUT_DIR = ".triton-out"
# Names the audit lets a Triton workspace decorate a kernel with: what makes a function a kernel.
JIT_DECORATORS = ("triton.jit",)


def triton_version() -> str:
    """Triton's version where the build runs, read without importing it; ToolchainMissing without it."""
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        raise ToolchainMissing(
            "Triton", "install triton (CUDA builds of torch bring it: pip install torch)"
        ) from None


def triton_command(capability: int) -> list[str]:
    """The compile: the script under the interpreter that runs the build (-I: no user site, no cwd)."""
    return [
        sys.executable, "-I", str(COMPILE_SCRIPT), "--reference", f"./{REFERENCE_NAME}",
        "--out", f"./{OUTPUT_DIR}", "--capability", str(capability),
    ]  # fmt: skip


def capability(arch: str) -> int:
    """`sm_90a` -> 90."""
    digits = "".join(c for c in arch.removeprefix("sm_").removeprefix("compute_") if c.isdigit())
    return int(digits or 0)


def readable_paths() -> list[Path]:
    """What the compile reads besides staging: the script and the Python installation (torch, Triton
    and the ptxas Triton ships)."""
    # torch seeds its generators from /dev/urandom at import.
    paths = {COMPILE_SCRIPT, Path(sys.prefix), Path(sys.base_prefix), Path("/dev/urandom")}
    paths |= {Path(p) for p in sys.path if p and Path(p).is_dir() and "site-packages" in p}
    return sorted(paths)


def declared_kernels(sources: dict[str, str]) -> dict[str, tuple[str, int]]:
    """Kernel name -> (file, line of its def) for every function decorated with `triton.jit` (directly,
    or under autotune and heuristics), read from the sources without running them."""
    found: dict[str, tuple[str, int]] = {}
    for file, text in sorted(sources.items()):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        aliases = _triton_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                _decorator_name(d, aliases) in JIT_DECORATORS for d in node.decorator_list
            ):
                found.setdefault(node.name, (file, node.lineno))
    return found


def syntax_problems(sources: dict[str, str]) -> list[Diagnostic]:
    """A module Python cannot parse, at its line: otherwise its kernels would just be missing."""
    problems = []
    for file, text in sorted(sources.items()):
        try:
            ast.parse(text)
        except SyntaxError as exc:
            problems.append(
                Diagnostic(
                    file=file,
                    line=exc.lineno,
                    column=exc.offset,
                    severity="error",
                    message=f"SyntaxError: {exc.msg}",
                    tool="triton",
                )
            )
    return problems


def _triton_aliases(tree: ast.Module) -> dict[str, str]:
    aliases = {"triton": "triton"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton":
                    aliases[alias.asname or "triton"] = "triton"
        elif isinstance(node, ast.ImportFrom) and node.module == "triton" and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"triton.{alias.name}"
    return aliases


def _decorator_name(node: ast.expr, aliases: dict[str, str]) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    parts: list[str] = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if not isinstance(target, ast.Name) or target.id not in aliases:
        return ""
    return ".".join([aliases[target.id], *reversed(parts)])


class _Compiled(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kernel: str
    cubin: str
    shared: int = 0
    launch: str = ""


class _Diagnostic(BaseModel):
    model_config = ConfigDict(extra="ignore")
    file: str | None = None
    line: int | None = None
    column: int | None = None
    severity: Severity
    message: str


class _Report(BaseModel):
    model_config = ConfigDict(extra="ignore")
    compiled: list[_Compiled] = []
    diagnostics: list[_Diagnostic] = []
    traced: bool = False
    seconds: dict[str, float] = {}


def read_report(
    output: Path, declared: dict[str, tuple[str, int]], files: set[str], arch: str, exit_status: int
) -> tuple[list[Diagnostic], list[KernelResources], str]:
    """(diagnostics, kernels, a note on what was compiled and where the time went) from the script's
    output directory. Every
    declared kernel is listed (a kernel no launch reached with 0 registers); files and names the script
    reports outside the workspace's are dropped."""
    try:
        report = _Report.model_validate_json((output / "report.json").read_bytes())
    except (OSError, ValidationError):
        report = _Report()
    diagnostics = [
        Diagnostic(
            file=d.file if d.file in files else None,
            line=d.line if d.file in files else None,
            column=d.column if d.file in files else None,
            severity=d.severity,
            message=d.message[:2000],
            tool="triton",
        )
        for d in report.diagnostics[:200]
    ]
    if exit_status != 0 and not any(d.severity == "error" for d in diagnostics):
        diagnostics.append(
            Diagnostic(
                file=None,
                severity="error",
                message=f"the Triton compile stopped with exit status {exit_status} and no error of its own",
                tool="triton",
            )
        )
    registers: dict[str, int] = {}
    shared: dict[str, int] = {}
    specialisations = 0
    for entry in report.compiled:
        if entry.kernel not in declared or "/" in entry.cubin:
            continue
        try:
            counts = register_counts((output / entry.cubin).read_bytes())
        except OSError:
            continue
        specialisations += 1
        registers[entry.kernel] = max(registers.get(entry.kernel, 0), counts.get(entry.kernel, 0))
        shared[entry.kernel] = max(shared.get(entry.kernel, 0), max(entry.shared, 0))
    kernels = [
        KernelResources(
            file=file,
            name=name,
            mangled_name=name,
            arch=arch,
            registers=registers.get(name, 0),
            shared_memory_bytes=shared.get(name, 0),
        )
        for name, (file, _line) in sorted(declared.items())
    ]
    # A process started ahead paid its imports before the build: its waiting is not the build's time.
    ahead = "wait" in report.seconds
    phases = [(p, s) for p, s in report.seconds.items() if p in ("import", "load", "trace", "compile")]
    spent = ("compile process started ahead; " if ahead else "") + ", ".join(
        f"{p} {s:.2f} s" for p, s in phases
    )
    note = f"{specialisations} launch specialisation(s) compiled for {arch} ({spent})"
    return diagnostics, kernels, note


def name_problems(declared: dict[str, tuple[str, int]]) -> list[Diagnostic]:
    """Kernels named the way library or Inductor kernels are (`triton_*`, `sm90_*`, `cutlass...`): the
    profile's trace could not tell them from those, so it never credits them; refused here, with the fix."""
    return [
        Diagnostic(
            file=file,
            line=line,
            severity="error",
            message=f"kernel {name}: names like this are reserved for library and Inductor kernels "
            "(triton_*, sm90_*, cutlass, cublas, ...), which the profile could not tell apart from "
            "yours: rename it",
            tool="triton",
        )
        for name, (file, line) in sorted(declared.items())
        if library_lookalike(name)
    ]

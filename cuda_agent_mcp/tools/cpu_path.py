"""What device 'cpu' can judge: a pure-PyTorch ModelNew, with no kernel sources and no cuda_extension.

CUDA kernels run on an NVIDIA GPU only. On the CPU a workspace's kernels would be built (tens of
seconds) and then fail on the first CPU tensor with the harness's traceback, which tells a newcomer
nothing; so the command line refuses such a workspace up front, in one line (docs/DECISIONS.md,
"Without a GPU, one honest path"). The tool layer itself still runs them: its CPU tests build the
examples' real kernels beside a pure-PyTorch candidate on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.workspace import EXTENSION_NAME, REFERENCE_FILE, Workspace

CPU_SCOPE = "--device cpu checks pure-PyTorch candidates only"


def python_only(build: BuildResult, device: str) -> bool:
    """On the CPU a workspace without kernel sources is a pure-PyTorch ModelNew: it runs without an
    extension (the build's `no_sources` is then no failure). On a GPU it stays a failed build."""
    return device == "cpu" and build.failure == "no_sources"


def cpu_refusal(workspace: Workspace) -> str | None:
    """Why device 'cpu' cannot judge this workspace's candidate (one line), or None when it can."""
    if workspace.language == "triton":  # Triton's kernels compile for and run on a GPU only
        return f"this is a Triton workspace, whose @triton.jit kernels run on an NVIDIA GPU only; {CPU_SCOPE}"
    sources = [source.relpath for source in workspace.build_sources()]
    if sources:
        shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
        return (
            f"this workspace has CUDA kernel sources ({shown}); {CPU_SCOPE}: run it on a machine with "
            "an NVIDIA GPU"
        )
    importers = [path.name for path in _candidate_modules(workspace.root) if _imports_extension(path)]
    if importers:
        return (
            f"{importers[0]} imports {EXTENSION_NAME}, which is built from kernel sources and runs on a GPU "
            f"only; {CPU_SCOPE} (a ModelNew that does not import {EXTENSION_NAME})"
        )
    return None


def check_cpu_candidate(workspace: Workspace, device: str) -> None:
    """Refuse (UsageError) a device-'cpu' evaluation of a candidate that needs a GPU; nothing ran."""
    if device == "cpu" and (reason := cpu_refusal(workspace)) is not None:
        raise UsageError(reason)


def _candidate_modules(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.glob("*.py")
        if path.name != REFERENCE_FILE and path.is_file() and not path.is_symlink()
    )


def _imports_extension(path: Path) -> bool:
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return False  # the judge reports what it cannot load
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == EXTENSION_NAME for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == EXTENSION_NAME:
            return True
    return False

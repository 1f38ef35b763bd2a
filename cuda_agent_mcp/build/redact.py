"""Compiler output with nothing of files outside the workspace: what `Diagnostic`s and `BuildResult.log`
are made from.

The view (`confinement.py`) keeps compilers from reading such files; this keeps their output from
quoting one anyway (a build allowed to run with reduced isolation, a `#line` that names another file)
and from telling which of them exist: a message located in a file that is neither the workspace's nor
the toolchain's is withheld with its source excerpt, include context naming one is replaced, and a
failure to open one reads the same whether it exists, is unreadable or is missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cuda_agent_mcp.build.confinement import SYSTEM_READABLE, TEMP_DIR
from cuda_agent_mcp.build.diagnostics import EDG_MESSAGE, GAS_MESSAGE, GCC_MESSAGE
from cuda_agent_mcp.results import Diagnostic

OUTSIDE = "<outside the workspace>"
Scope = Literal["workspace", "temporary", "toolchain", "outside"]

_CONTEXT = re.compile(r"^(?P<file>[^:\s][^:]*): (?P<rest>(?:In |At |Assembler messages).*)$")
_INCLUDED = re.compile(r"^(?P<lead>In file included from |\s+from )(?P<file>[^:\s][^:]*)(?P<rest>:\d+.*)$")
_OPEN_FAILURE = re.compile(
    r"(?P<path>[^\s:][^:]*): (?:Permission denied|No such file or directory|Operation not permitted|"
    r"Not a directory|Is a directory|Too many levels of symbolic links)$"
)
_GAS_NOT_FOUND = re.compile(
    r"(?P<lead>(?:Error|Warning): )(?:file not found|can't open \S+ for reading): (?P<path>\S+).*$"
)
_NOT_IN_VIEW = "not in the workspace or the toolchain (the build can read nothing else)"


@dataclass(frozen=True)
class PathScope:
    """Sorts the paths compilers print: the staging copy of the workspace, its temporary files, the
    toolchain, or anything else."""

    staging: Path
    toolchain: tuple[Path, ...]

    @classmethod
    def of(cls, staging: Path, toolchain: Sequence[Path]) -> PathScope:
        paths: tuple[str | Path, ...] = (*toolchain, *SYSTEM_READABLE)
        roots = {Path(os.path.realpath(p)) for p in paths}
        return cls(Path(os.path.realpath(staging)), tuple(sorted(roots)))

    def classify(self, raw: str) -> tuple[Scope, str]:
        """The path's scope and how to name it: workspace-relative, or as printed."""
        raw = raw.strip()
        real = Path(os.path.realpath(raw if os.path.isabs(raw) else self.staging / raw))
        if real.is_relative_to(self.staging):
            relative = real.relative_to(self.staging).as_posix()
            return ("temporary" if relative.split("/")[0] == TEMP_DIR else "workspace"), relative
        if any(real.is_relative_to(root) for root in self.toolchain):
            return "toolchain", raw
        return "outside", raw

    def strip_staging(self, text: str) -> str:
        """The staging directory's absolute name removed: messages name workspace-relative paths."""
        for prefix in {f"{self.staging}/", f"{os.path.abspath(self.staging)}/"}:
            text = text.replace(prefix, "")
        return text


def redact_output(output: str, scope: PathScope) -> str:
    """`output` without excerpts, contexts and messages of files outside the workspace and toolchain."""
    kept: list[str] = []
    skipping = False
    for line in scope.strip_staging(output).splitlines():
        if skipping and line[:1] in (" ", "\t") and not _INCLUDED.match(line):
            continue  # the excerpt (source line, caret) under a withheld message
        skipping = False
        location = GCC_MESSAGE.match(line) or EDG_MESSAGE.match(line) or GAS_MESSAGE.match(line)
        if location is not None and scope.classify(location.group("file"))[0] == "outside":
            kept.append(
                f"{OUTSIDE}: {_severity(location.group('sev'))}: withheld (a message located in a file outside the workspace)"
            )
            skipping = True
            continue
        context = _CONTEXT.match(line) or _INCLUDED.match(line)
        if context is not None and scope.classify(context.group("file"))[0] == "outside":
            line = line.replace(context.group("file"), OUTSIDE, 1)
        kept.append(_uniform_open_failure(line, scope))
    return "\n".join(kept) + ("\n" if output.endswith("\n") else "")


def _uniform_open_failure(line: str, scope: PathScope) -> str:
    """'Permission denied' and 'No such file' for a path outside would tell which files exist."""
    if (match := _OPEN_FAILURE.search(line)) and scope.classify(match.group("path"))[0] == "outside":
        return line[: match.start()] + f"{match.group('path')}: {_NOT_IN_VIEW}"
    if (match := _GAS_NOT_FOUND.search(line)) and scope.classify(match.group("path"))[0] == "outside":
        return line[: match.start()] + f"{match.group('lead')}{match.group('path')}: {_NOT_IN_VIEW}"
    return line


def _severity(word: str) -> str:
    return {"fatal error": "error", "catastrophic error": "error", "remark": "note"}.get(word, word.lower())


def place(diagnostic: Diagnostic, scope: PathScope, unit_file: str) -> Diagnostic:
    """A parsed diagnostic's file as the agent knows it: workspace-relative, a toolchain header as
    printed, the translation unit for the compiler's temporary files, None for anything else."""
    if diagnostic.file is None or diagnostic.file == OUTSIDE:
        return diagnostic.model_copy(update={"file": None})
    where, name = scope.classify(diagnostic.file)
    if where == "workspace":
        return diagnostic.model_copy(update={"file": name})
    if where == "temporary":
        return diagnostic.model_copy(update={"file": unit_file, "line": None, "column": None})
    if where == "toolchain":
        return diagnostic
    return diagnostic.model_copy(update={"file": None, "line": None, "column": None})


def workspace_line_reader(scope: PathScope) -> Callable[[str, int], str | None]:
    """One line of a staged workspace file (for placing nvcc's caret); None for any other file, so the
    trusted side never reads a path a message names."""

    def read(file: str, line: int) -> str | None:
        where, name = scope.classify(file)
        if where != "workspace":
            return None
        try:
            lines = (scope.staging / name).read_text(errors="replace").splitlines()
        except OSError:
            return None
        return lines[line - 1] if 0 < line <= len(lines) else None

    return read

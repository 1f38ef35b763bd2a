"""A binding that registers nothing compiles and links, and the extension then exports nothing: the
failure would appear only at verify, as an AttributeError. The build refuses it, naming the file.

A source check, not a symbol check: the registration's static flag is optimised out of the object at
-O3, while its initialiser (the call into the registry) stays; the macro's name in the source is what
an author writes. Comments do not count.
"""

from __future__ import annotations

import re

from cuda_agent_mcp.results import Diagnostic
from cuda_agent_mcp.workspace import SourceFile, Workspace

_REGISTER = re.compile(r"\bREGISTER_BINDING\s*\(")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
HOW = "add REGISTER_BINDING(<name>, <register function>) as binding_registry.h shows"


def registration_problems(workspace: Workspace, sources: list[SourceFile]) -> list[Diagnostic]:
    """Every `*_binding.cpp` must register something, and some C++ unit must: else one error each."""
    units = [s for s in sources if s.kind == "cpp"]
    registering = {s.relpath for s in units if _registers(workspace, s)}
    problems = [
        Diagnostic(
            file=s.relpath,
            severity="error",
            message=f"{s.relpath} registers no function, so cuda_extension would not export it: {HOW}",
            tool="c++",
        )
        for s in units
        if s.relpath.rsplit("/", 1)[-1].split(".")[0].endswith("_binding") and s.relpath not in registering
    ]
    if not registering and not problems:
        where = ", ".join(s.relpath for s in units) or "no C++ file"
        problems.append(
            Diagnostic(
                file=units[0].relpath if units else None,
                severity="error",
                message=f"no binding registers a function ({where}), so cuda_extension would export "
                f"nothing: write kernels/<name>_binding.cpp and {HOW}",
                tool="c++",
            )
        )
    return problems


def _registers(workspace: Workspace, source: SourceFile) -> bool:
    try:
        text = (workspace.root / source.relpath).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _REGISTER.search(_COMMENT.sub(" ", text)) is not None

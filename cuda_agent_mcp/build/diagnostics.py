"""Parse nvcc, g++, ptxas and linker output into Diagnostics and per-kernel resource usage."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from cuda_agent_mcp.results import Diagnostic, KernelResources, Severity

# g++ (and nvcc's host pass): path:line:col: severity: message
GCC_MESSAGE = re.compile(
    r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
# nvcc's front end: path(line): severity[ #code-D]: message
EDG_MESSAGE = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark)(?: #[\w-]+)?: (?P<msg>.*)$"
)
_PTXAS_MSG = re.compile(r"^ptxas (?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$")
# ptxas on the PTX nvcc generated ("ptxas /tmp/tmpxft_..._k.ptx, line 31; error   : Instruction 'wgmma.fence'
# not supported on .target 'sm_90'"): the line is the PTX's, so only the unit is named, never that file.
_PTXAS_PTX_MSG = re.compile(r"^ptxas \S+, line \d+; (?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$")
# the assembler (an `asm` block's directives): path:line: Error: message
GAS_MESSAGE = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+): (?P<sev>Error|Warning): (?P<msg>.*)$")
# a message redact.py withheld: <outside the workspace>: severity: text
_WITHHELD = re.compile(r"^<outside the workspace>: (?P<sev>error|warning|note): (?P<msg>.*)$")
_LINK_UNDEFINED = re.compile(r"undefined reference to [`'](?P<sym>[^'`]+)'")
_LINK_OBJECT = re.compile(r"^(?:/usr/bin/)?ld: (?P<obj>\S+?\.o): in function")

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS = re.compile(r"ptxas info\s*: Function properties for (?P<name>\S+)")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")

_SEVERITY: dict[str, Severity] = {
    "fatal error": "error",
    "catastrophic error": "error",
    "error": "error",
    "fatal": "error",
    "warning": "warning",
    "remark": "note",
    "note": "note",
    "Error": "error",
    "Warning": "warning",
}


def parse_compiler_output(
    output: str,
    *,
    tool: str,
    path_map: Mapping[str, str],
    unit_file: str,
    source_line: Callable[[str, int], str | None] = lambda _file, _line: None,
) -> list[Diagnostic]:
    """Every message in `output`; paths are rewritten through `path_map`, and messages that name no
    file (ptxas) are attributed to the translation unit being compiled."""
    diagnostics: list[Diagnostic] = []
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if match := EDG_MESSAGE.match(line):
            file = path_map.get(match.group("file").strip(), match.group("file").strip())
            column = _caret_column(lines, index, source_line(file, int(match.group("line"))))
            diagnostics.append(_located(match, "nvcc", path_map, column))
        elif match := GCC_MESSAGE.match(line):
            column = int(match.group("col")) if match.group("col") else None
            diagnostics.append(_located(match, "nvcc" if tool == "nvcc" else "c++", path_map, column))
        elif match := GAS_MESSAGE.match(line):
            diagnostics.append(_located(match, "nvcc" if tool == "nvcc" else "c++", path_map, None))
        elif match := _WITHHELD.match(line):
            diagnostics.append(
                Diagnostic(
                    file=None,
                    severity=_SEVERITY[match.group("sev")],
                    message=match.group("msg"),
                    tool="nvcc" if tool == "nvcc" else "c++",
                )
            )
        elif match := _PTXAS_MSG.match(line) or _PTXAS_PTX_MSG.match(line):
            diagnostics.append(
                Diagnostic(
                    file=unit_file,
                    severity=_SEVERITY[match.group("sev")],
                    message=match.group("msg"),
                    tool="ptxas",
                )
            )
    return diagnostics


def _located(
    match: re.Match[str], tool: Literal["nvcc", "c++"], path_map: Mapping[str, str], column: int | None
) -> Diagnostic:
    raw = match.group("file").strip()
    return Diagnostic(
        file=path_map.get(raw, raw),
        line=int(match.group("line")),
        column=column,
        severity=_SEVERITY[match.group("sev")],
        message=match.group("msg").strip(),
        tool=tool,
    )


def _caret_column(lines: list[str], index: int, source: str | None) -> int | None:
    """nvcc prints the offending line, re-indented, then a caret under the spot. The caret's offset
    into the printed text, plus the real line's own indentation, gives the 1-based column."""
    if index + 2 >= len(lines) or lines[index + 2].strip() != "^":
        return None
    printed, caret = lines[index + 1], lines[index + 2]
    into_text = caret.index("^") - (len(printed) - len(printed.lstrip()))
    indent = len(source) - len(source.lstrip()) if source is not None else 2
    return max(into_text, 0) + indent + 1


def parse_unresolved_symbols(output: str, object_to_file: Mapping[str, str]) -> list[Diagnostic]:
    """Link-time references to symbols no object or library defines, except the Python C API
    (which the interpreter provides at import time)."""
    found: dict[str, str | None] = {}
    current_file: str | None = None
    for line in output.splitlines():
        if match := _LINK_OBJECT.match(line):
            current_file = _file_of_object(match.group("obj"), object_to_file)
        if match := _LINK_UNDEFINED.search(line):
            symbol = match.group("sym")
            if not symbol.startswith(("Py", "_Py")) and symbol not in found:
                found[symbol] = current_file
    return [
        Diagnostic(
            file=file,
            severity="error",
            message=f"undefined symbol `{symbol}`: declared and used but defined in no kernel source "
            '(check the launcher\'s name and its extern "C")',
            tool="linker",
        )
        for symbol, file in found.items()
    ]


def _file_of_object(obj: str, object_to_file: Mapping[str, str]) -> str | None:
    for suffix, file in object_to_file.items():
        if obj.endswith(suffix):
            return file
    return None


@dataclass
class _KernelAccumulator:
    arch: str
    values: dict[str, int] = field(default_factory=dict)


def parse_ptxas_resources(
    output: str, *, file: str, demangle: Callable[[list[str]], list[str]]
) -> list[KernelResources]:
    """Resource usage of each entry function (kernel) in `ptxas -v` output."""
    kernels: dict[str, _KernelAccumulator] = {}
    current: str | None = None
    for line in output.splitlines():
        if match := _ENTRY.search(line):
            current = match.group("name")
            kernels[current] = _KernelAccumulator(arch=match.group("arch"))
        elif match := _PROPS.search(line):
            current = match.group("name") if match.group("name") in kernels else None
        elif current and (match := _FRAME.search(line)):
            kernels[current].values.update(
                stack=int(match.group("stack")),
                spill_st=int(match.group("st")),
                spill_ld=int(match.group("ld")),
            )
        elif current and (match := _USED.search(line)):
            rest = match.group("rest")
            values = kernels[current].values
            values["regs"] = int(match.group("regs"))
            values["smem"] = int(m.group(1)) if (m := _SMEM.search(rest)) else 0
            values["cmem"] = int(m.group(1)) if (m := _CMEM.search(rest)) else 0
            values["barriers"] = int(m.group(1)) if (m := _BARRIERS.search(rest)) else 0
    names = list(kernels)
    readable = demangle(names) if names else []
    return [
        KernelResources(
            file=file,
            name=pretty,
            mangled_name=name,
            arch=kernels[name].arch,
            registers=kernels[name].values.get("regs", 0),
            shared_memory_bytes=kernels[name].values.get("smem", 0),
            constant_memory_bytes=kernels[name].values.get("cmem", 0),
            stack_frame_bytes=kernels[name].values.get("stack", 0),
            spill_stores_bytes=kernels[name].values.get("spill_st", 0),
            spill_loads_bytes=kernels[name].values.get("spill_ld", 0),
            barriers=kernels[name].values.get("barriers", 0),
        )
        for name, pretty in zip(names, readable, strict=True)
    ]


def demangle(names: list[str]) -> list[str]:
    """Demangle C++ symbol names with c++filt; names are returned unchanged where it is missing."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return names
    try:
        done = subprocess.run(
            [tool], input="\n".join(names), capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return names
    out = done.stdout.splitlines()
    return out if len(out) == len(names) else names

"""The build's inputs, taken from the workspace safely: regular files only, by safe names, bytes hashed
as copied, and no directive that reaches outside the staging directory.

The workspace is the agent's: the `run` tool can plant symbolic links, FIFOs or hard links in it, and
file names reach the compilers' command lines (nvcc runs its sub-commands through a shell, so a source
named `x$(cmd).cu` runs `cmd`). So every input is opened beneath the workspace without following a link,
must be a regular file with one name and a name of letters, digits and `_.+-`, and is hashed from the
bytes copied into staging (what the compiler sees is what the cache key says). Directives that name
files (`#include`, `#include_next`, `__has_include`, `#pragma GCC dependency`, `#line`, `#embed`,
`.incbin`) are checked on the copies; these refusals are early, readable feedback: the Landlock view of
`confinement.py` is what stops what this scan cannot see (paths built by macros, strings split apart).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from cuda_agent_mcp.results import Diagnostic
from cuda_agent_mcp.workspace.layout import HEADER_SUFFIXES, KERNELS_DIR, SOURCE_SUFFIXES
from cuda_agent_mcp.workspace.limits import MAX_FILE_BYTES, over_file_limit

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_STRINGS_OR_COMMENTS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_INCLUDE = re.compile(r"#\s*(?P<kind>include_next|include|import|embed)\b\s*(?P<target>.*)")
_HAS_INCLUDE = re.compile(r"__has_include(?P<next>_next)?\s*\(\s*(?P<target>[\"<][^\">]*[\">])")
_LINE = re.compile(r"#\s*(?:line\s+)?\d+\s+\"")
_DEPENDENCY = re.compile(r"\bGCC\s+dependency\b")
_PRAGMA_DEPENDENCY = re.compile(r"_Pragma\s*\(.*dependency")
_INCBIN = re.compile(r"\.incbin\b")
_ASM_INCLUDE = re.compile(r'"(?:[^"\\\n]|\\.)*\.include\b')  # the assembler's .include, in an asm string
_QUOTED = re.compile(r"\s*(?P<open>[\"<])(?P<path>[^\">]*)[\">]")


@dataclass(frozen=True)
class StagedInputs:
    """The files copied into staging, relpath -> sha256 of the bytes copied; or why the copy was refused."""

    hashes: dict[str, str]
    refused: list[Diagnostic]


def stage_inputs(root: Path, staging: Path, relpaths: list[str]) -> StagedInputs:
    """Copy `relpaths` (workspace-relative) from `root` into `staging`, refusing unsafe ones."""
    hashes: dict[str, str] = {}
    refused: list[Diagnostic] = []
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for relpath in relpaths:
            problem = name_problem(relpath)
            data = None
            if problem is None:
                data, problem = _read_beneath(root_fd, relpath)
            if problem is not None or data is None:
                refused.append(_refusal(relpath, None, problem or "could not be read"))
                continue
            target = staging / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            hashes[relpath] = hashlib.sha256(data).hexdigest()
    finally:
        os.close(root_fd)
    return StagedInputs(hashes, refused)


def planted_links(root: Path) -> list[Diagnostic]:
    """Symbolic links among the workspace's sources and headers (the workspace listing skips them, so
    an include of one would fail without saying why)."""
    found = []
    for directory in (root, root / KERNELS_DIR):
        if directory.is_symlink() or not directory.is_dir():
            continue  # a linked kernels/ is refused when its files are staged
        for path in sorted(directory.iterdir()):
            if path.is_symlink() and (path.suffix in SOURCE_SUFFIXES or path.suffix in HEADER_SUFFIXES):
                found.append(
                    _refusal(
                        path.relative_to(root).as_posix(),
                        None,
                        "is a symbolic link: the build reads only regular files of the workspace; copy the file in",
                    )
                )
    return found


def name_problem(relpath: str) -> str | None:
    """Why a workspace path may not be a build input, or None."""
    parts = relpath.split("/")
    if all(_SAFE_NAME.fullmatch(part) for part in parts):
        return None
    return (
        "this file name cannot be built: use letters, digits and '_', '.', '+', '-' only (not first), "
        "e.g. kernels/my_kernel.cu"
    )


def _read_beneath(root_fd: int, relpath: str) -> tuple[bytes | None, str | None]:
    """The file's bytes, opened component by component without following a link."""
    parts = relpath.split("/")
    opened: list[int] = []
    directory = root_fd
    try:
        for part in parts[:-1]:
            try:
                directory = os.open(part, _DIRECTORY_FLAGS, dir_fd=directory)
            except OSError:
                return (
                    None,
                    f"{part}/ is a symbolic link or not a directory: the build reads only the workspace",
                )
            opened.append(directory)
        try:
            fd = os.open(parts[-1], _OPEN_FLAGS, dir_fd=directory)
        except OSError:
            return (
                None,
                "is a symbolic link or cannot be opened: the build reads only regular files of the workspace",
            )
        opened.append(fd)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "is not a regular file: the build reads only regular files of the workspace"
        if info.st_nlink > 1:
            return None, "is a hard link: the build reads only files that belong to the workspace alone"
        if info.st_size > MAX_FILE_BYTES:
            return None, over_file_limit(relpath, info.st_size)
        return _read_all(fd), None
    finally:
        for fd in reversed(opened):
            os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    total = 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_FILE_BYTES:  # the file grew after fstat
            break
    return b"".join(chunks)


def scan_directives(staging: Path, relpaths: list[str]) -> list[Diagnostic]:
    """Directives in the staged files that name a file outside staging, or embed one."""
    found: list[Diagnostic] = []
    for relpath in relpaths:
        text = (staging / relpath).read_text(errors="replace")
        for line_number, line in _logical_lines(_blank_comments(text)):
            if problem := directive_problem(line, relpath):
                found.append(_refusal(relpath, line_number, problem))
    return found


def directive_problem(line: str, relpath: str) -> str | None:
    """Why one logical line (comments blanked) may not be built, or None."""
    stripped = line.strip()
    if _INCBIN.search(line):
        return ".incbin embeds a file into the object: it is not allowed; put data in your sources"
    if _ASM_INCLUDE.search(line):
        return "the assembler's .include reads another file: it is not allowed"
    if (stripped.startswith("#") and _DEPENDENCY.search(stripped)) or _PRAGMA_DEPENDENCY.search(line):
        return "#pragma GCC dependency reads another file: it is not allowed"
    if _LINE.match(stripped):
        return "#line with a file name changes where messages point: it is not allowed"
    if match := _INCLUDE.match(stripped):
        if match.group("kind") == "include_next":
            return "#include_next searches the toolchain's directories past this one: use #include"
        if match.group("kind") in ("import", "embed"):
            return f"#{match.group('kind')} is not allowed: use #include of a workspace file"
        if problem := _target_problem(match.group("target"), relpath):
            return problem
    for match in _HAS_INCLUDE.finditer(line):
        if match.group("next"):
            return "__has_include_next searches the toolchain's directories: it is not allowed"
        if problem := _target_problem(match.group("target"), relpath):
            return problem
    return None


def _target_problem(target: str, relpath: str) -> str | None:
    quoted = _QUOTED.match(target)
    if quoted is None:
        return None  # a macro: the view stops whatever it expands to
    path = quoted.group("path")
    if path.startswith(("/", "~")):
        return f"{path} is an absolute path: include workspace files by a relative path and toolchain headers by <name>"
    if quoted.group("open") == "<":
        escapes = ".." in path.split("/")
    else:
        escapes = posixpath.normpath(posixpath.join(posixpath.dirname(relpath), path)).startswith("..")
    if escapes:
        return f"{path} climbs out of the workspace: include only files inside it"
    return None


def _blank_comments(text: str) -> str:
    """Comments become spaces (their newlines kept, so line numbers hold); strings stay, since an asm
    string can carry `.incbin`."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        return token if token[0] in "\"'" else re.sub(r"[^\n]", " ", token)

    return _STRINGS_OR_COMMENTS.sub(blank, text)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines joined across backslash-newlines, each with the number of its first physical line."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 1
    for number, physical in enumerate(text.split("\n"), start=1):
        if not pending:
            start = number
        if physical.endswith("\\"):
            pending += physical[:-1]
            continue
        lines.append((start, pending + physical))
        pending = ""
    if pending:
        lines.append((start, pending))
    return lines


def _refusal(relpath: str, line: int | None, problem: str) -> Diagnostic:
    return Diagnostic(file=relpath, line=line, severity="error", message=problem, tool="build")

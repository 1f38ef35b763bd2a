"""File operations confined to one workspace root; protected files are read-only.

Every argument a caller gives (a path, a glob, a regular expression, new content) is checked here before
it reaches the filesystem, so a bad one is answered with a `WorkspaceError` naming the argument and what
it expects, never an exception from deep inside `pathlib` or `os` (which the MCP layer could only report
as a bare crash)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from cuda_agent_mcp.errors import LimitExceeded, WorkspaceError
from cuda_agent_mcp.workspace.layout import META_DIR, PROTECTED_FILES
from cuda_agent_mcp.workspace.limits import MAX_FILE_BYTES, MAX_FILE_BYTES_NAME, over_file_limit

MAX_PATH_BYTES = 1024  # a workspace path or glob, whole
MAX_NAME_BYTES = 255  # one name in it (the filesystems' NAME_MAX)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def check_relative(argument: str, value: str, expects: str) -> PurePosixPath:
    """`value` as a workspace-relative path (or glob), or a WorkspaceError saying which argument is wrong."""
    if "\x00" in value:
        raise WorkspaceError(f"{argument}: must not contain a NUL byte")
    if not value:
        raise WorkspaceError(f"{argument}: must not be empty; expected {expects}")
    try:
        length = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise WorkspaceError(f"{argument}: must be valid Unicode text (it holds a lone surrogate)") from None
    if length > MAX_PATH_BYTES:
        raise WorkspaceError(
            f"{argument}: is {length} bytes long, over the {MAX_PATH_BYTES} a workspace path may have"
        )
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise WorkspaceError(f"{argument}: must be relative to the workspace (got {_shown(value)})")
    if ".." in pure.parts:
        raise WorkspaceError(
            f"{argument}: must stay inside the workspace, without '..' (got {_shown(value)}, which leads outside it)"
        )
    if any(len(part.encode("utf-8")) > MAX_NAME_BYTES for part in pure.parts):
        raise WorkspaceError(f"{argument}: a name in it is longer than {MAX_NAME_BYTES} bytes")
    return pure


def check_pattern(pattern: str) -> str:
    """A glob relative to the workspace, as `Path.glob` accepts it."""
    pure = check_relative("pattern", pattern, "a glob relative to the workspace, e.g. kernels/*.cu")
    if any("**" in part and part != "**" for part in pure.parts):
        raise WorkspaceError(
            f"pattern: '**' must be a whole path component, e.g. kernels/**/*.cu (got {_shown(pattern)})"
        )
    return pattern


def check_text(argument: str, text: str) -> bytes:
    """Text to write, as UTF-8."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError(f"{argument}: must be valid Unicode text (it holds a lone surrogate)") from None


def resolve_inside(root: Path, relpath: str, argument: str = "path") -> Path:
    """The absolute path of `relpath` under `root`; refuses absolute paths, `..` and symlink escapes."""
    pure = check_relative(argument, relpath, "a path inside the workspace, e.g. kernels/relu.cu")
    try:
        path = (root / pure).resolve()
    except (OSError, RuntimeError) as exc:  # a symbolic link loop (RuntimeError before Python 3.13)
        raise WorkspaceError(f"{argument}: {relpath} cannot be resolved ({_reason(exc)})") from None
    if not path.is_relative_to(root.resolve()):
        raise WorkspaceError(f"{relpath!r} leads outside the workspace")
    return path


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _check_writable(root: Path, relpath: str) -> Path:
    path = resolve_inside(root, relpath)
    rel = path.relative_to(root.resolve()).as_posix()
    if rel in PROTECTED_FILES or rel.split("/")[0] == META_DIR:
        raise WorkspaceError(f"{rel} is protected: it belongs to the harness and cannot be changed")
    if path.is_dir():
        raise WorkspaceError(f"path: {relpath} is a directory; expected a file path, e.g. {relpath}/x.cu")
    return path


def read_text(root: Path, relpath: str) -> str:
    path = resolve_inside(root, relpath)
    if path.is_dir():
        raise WorkspaceError(f"path: {relpath} is a directory; list_files shows the files in it")
    if not path.is_file():
        raise WorkspaceError(f"{relpath}: no such file")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LimitExceeded(MAX_FILE_BYTES_NAME, over_file_limit(relpath, size))
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError(f"{relpath} is not UTF-8 text") from None
    except OSError as exc:
        raise WorkspaceError(f"{relpath} cannot be read: {_reason(exc)}") from None


def write_text(root: Path, relpath: str, content: str, argument: str = "content") -> int:
    """Write a file (creating folders); returns the bytes written."""
    path = _check_writable(root, relpath)
    data = check_text(argument, content)
    if len(data) > MAX_FILE_BYTES:
        raise LimitExceeded(MAX_FILE_BYTES_NAME, over_file_limit(relpath, len(data)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:  # a folder of the path is a file, the file was made read-only, the disk is full
        raise WorkspaceError(f"{relpath} cannot be written: {_reason(exc)}") from None
    return len(data)


def edit_text(root: Path, relpath: str, old: str, new: str, *, replace_all: bool = False) -> int:
    """Replace exact text; `old` must occur once unless replace_all. Returns the number of replacements."""
    _check_writable(root, relpath)
    if not old:
        raise WorkspaceError("old_text: must not be empty; expected the exact text to replace")
    check_text("old_text", old)
    check_text("new_text", new)
    text = read_text(root, relpath)
    count = text.count(old)
    if count == 0:
        raise WorkspaceError(f"{relpath}: the text to replace was not found")
    if count > 1 and not replace_all:
        raise WorkspaceError(
            f"{relpath}: the text to replace occurs {count} times; make it unique or replace all"
        )
    write_text(root, relpath, text.replace(old, new) if replace_all else text.replace(old, new, 1))
    return count if replace_all else 1


def list_paths(root: Path, pattern: str = "**/*") -> list[str]:
    """Files under the root matching a glob, without the harness's metadata folder."""
    base = root.resolve()
    try:
        found = [
            p for p in base.glob(check_pattern(pattern)) if p.is_file() and p.resolve().is_relative_to(base)
        ]
    except (OSError, RuntimeError, ValueError, NotImplementedError) as exc:  # what pathlib still refuses
        raise WorkspaceError(
            f"pattern: {_shown(pattern)} cannot be used as a glob ({_reason(exc)})"
        ) from None
    return sorted(p.relative_to(base).as_posix() for p in found if p.relative_to(base).parts[0] != META_DIR)


def search_text(
    root: Path, regex: str, pattern: str = "**/*", *, max_hits: int = 200
) -> list[tuple[str, int, str]]:
    """(file, line number, line) for each line matching `regex` in text files matching the glob."""
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise WorkspaceError(f"regex: not a valid regular expression (Python syntax): {exc}") from None
    except (RecursionError, OverflowError, ValueError) as exc:  # nested too deep, a repeat count too large
        raise WorkspaceError(f"regex: cannot be compiled ({exc})") from None
    hits: list[tuple[str, int, str]] = []
    for rel in list_paths(root, pattern):
        try:
            lines = read_text(root, rel).splitlines()
        except WorkspaceError:
            continue  # binary or unreadable files are not searched
        except LimitExceeded:
            continue  # nor files over the per-file limit
        for number, line in enumerate(lines, start=1):
            if compiled.search(line):
                hits.append((rel, number, line[:400]))
                if len(hits) >= max_hits:
                    return hits
    return hits

"""File operations confined to one workspace root; protected files are read-only."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from cuda_agent_mcp.errors import WorkspaceError
from cuda_agent_mcp.workspace.layout import META_DIR, PROTECTED_FILES

MAX_FILE_BYTES = 1024 * 1024


def resolve_inside(root: Path, relpath: str) -> Path:
    """The absolute path of `relpath` under `root`; refuses absolute paths, `..` and symlink escapes."""
    pure = PurePosixPath(relpath)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise WorkspaceError(f"{relpath!r}: paths must be relative to the workspace and stay inside it")
    path = (root / pure).resolve()
    if not path.is_relative_to(root.resolve()):
        raise WorkspaceError(f"{relpath!r} leads outside the workspace")
    return path


def _check_writable(root: Path, relpath: str) -> Path:
    path = resolve_inside(root, relpath)
    rel = path.relative_to(root.resolve()).as_posix()
    if rel in PROTECTED_FILES or rel.split("/")[0] == META_DIR:
        raise WorkspaceError(f"{rel} is protected: it belongs to the harness and cannot be changed")
    return path


def read_text(root: Path, relpath: str) -> str:
    path = resolve_inside(root, relpath)
    if not path.is_file():
        raise WorkspaceError(f"{relpath}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise WorkspaceError(f"{relpath} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError(f"{relpath} is not UTF-8 text") from None


def write_text(root: Path, relpath: str, content: str) -> int:
    """Write a file (creating folders); returns the bytes written."""
    path = _check_writable(root, relpath)
    data = content.encode("utf-8")
    if len(data) > MAX_FILE_BYTES:
        raise WorkspaceError(f"{relpath}: content is larger than {MAX_FILE_BYTES} bytes")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


def edit_text(root: Path, relpath: str, old: str, new: str, *, replace_all: bool = False) -> int:
    """Replace exact text; `old` must occur once unless replace_all. Returns the number of replacements."""
    _check_writable(root, relpath)
    text = read_text(root, relpath)
    count = text.count(old) if old else 0
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
    return sorted(
        p.relative_to(base).as_posix()
        for p in base.glob(pattern)
        if p.is_file() and p.resolve().is_relative_to(base) and p.relative_to(base).parts[0] != META_DIR
    )


def search_text(
    root: Path, regex: str, pattern: str = "**/*", *, max_hits: int = 200
) -> list[tuple[str, int, str]]:
    """(file, line number, line) for each line matching `regex` in text files matching the glob."""
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise WorkspaceError(f"bad regular expression {regex!r}: {exc}") from None
    hits: list[tuple[str, int, str]] = []
    for rel in list_paths(root, pattern):
        try:
            lines = read_text(root, rel).splitlines()
        except WorkspaceError:
            continue  # binary or oversized files are not searched
        for number, line in enumerate(lines, start=1):
            if compiled.search(line):
                hits.append((rel, number, line[:400]))
                if len(hits) >= max_hits:
                    return hits
    return hits

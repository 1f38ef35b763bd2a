"""The per-file limit of a workspace file, one value for every front-end and tool (docs/DECISIONS.md,
"One limit per quantity"): writing or editing a file, reading one back, staging a source or header for
compile, capturing the files an agent loop keeps. The workspace's total is a different quantity
(`SessionQuotas.workspace_quota_bytes`), and so is the largest file one command may write
(`SessionQuotas.command_file_bytes`: build outputs and profiles are not workspace files)."""

from __future__ import annotations

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES_NAME = "max_file_bytes"


def size_text(size: int) -> str:
    """A size as people read it: 20.0 MiB, 512.0 KiB, 300 bytes."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def over_file_limit(relpath: str, size: int) -> str:
    """The one message every front-end gives for a file over the limit."""
    return (
        f"{relpath} is {size_text(size)}, over the {MAX_FILE_BYTES // 1024**2} MiB per-file limit "
        f"({MAX_FILE_BYTES_NAME}): split it into smaller files"
    )

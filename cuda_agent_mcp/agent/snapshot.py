"""The files a policy edits (model_new.py and kernels/), captured and put back: the loop keeps the best
verified version and restores it at the end."""

from __future__ import annotations

import hashlib
import re

from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.workspace import CANDIDATE_FILE
from cuda_agent_mcp.workspace.limits import MAX_FILE_BYTES

KERNELS = "kernels"


def editable_files(session: Session) -> dict[str, str]:
    root = session.workspace.root
    files: dict[str, str] = {}
    candidate = root / CANDIDATE_FILE
    if candidate.is_file():
        files[CANDIDATE_FILE] = candidate.read_text(errors="replace")
    kernels = root / KERNELS
    if kernels.is_dir():
        for path in sorted(kernels.rglob("*")):
            if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES and not path.name.startswith("."):
                files[path.relative_to(root).as_posix()] = path.read_text(errors="replace")
    return files


def code_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()[:16]


def restore(session: Session, files: dict[str, str]) -> None:
    """Make the editable files exactly `files`: others under kernels/ are removed."""
    root = session.workspace.root
    kernels = root / KERNELS
    if kernels.is_dir():
        for path in kernels.rglob("*"):
            if path.is_file() and path.relative_to(root).as_posix() not in files:
                path.unlink()
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


_FENCE = re.compile(r"^```[ \t]*([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_PATH = re.compile(r"(?:^|\s)(?:path=|file=)?((?:kernels/)?[\w.\-/]+\.(?:cu|cuh|cpp|h|hpp|py))\s*$")


def fenced_files(text: str) -> dict[str, str]:
    """Files in an answer written as fenced blocks whose info string names the path, e.g.
    ```cuda kernels/relu.cu ... ``` or ```python model_new.py ... ```."""
    files: dict[str, str] = {}
    for info, body in _FENCE.findall(text):
        match = _PATH.search(info.strip())
        if match:
            files[match.group(1)] = body
    return files

"""A session's quotas, the two measurements they need (what a workspace holds, how often it is called),
and what one command may still add and what the view reports of it (`WorkspaceQuota`, `QuotaOutcome`).

Enforced while a command runs, not checked after: the file size by RLIMIT_FSIZE, processes by the pids
cgroup (and RLIMIT_NPROC on a uid of the command's own), CPU seconds by RLIMIT_CPU (per process), the
workspace's bytes and files by the view (an overlay on a tmpfs sized to what is left: ENOSPC past it, or
a poll that kills the command). Calls per minute are counted by the server, per session.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import LimitExceeded

_BLOCK = 4096  # a tmpfs page: what the overlay's upper layer charges a file at least


class WorkspaceQuota(BaseModel):
    """What a command may still add to its working directory, enforced while it runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bytes: int = Field(ge=0, description="bytes it may still write")
    files: int = Field(ge=0, description="files and directories it may still create")
    present: int = Field(default=0, ge=0, description="files and directories there are (it may delete them)")


class QuotaOutcome(BaseModel):
    """What the view reported besides the command's own result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    timed_out: bool = False
    quota: Literal["bytes", "files"] | None = None
    merge_error: str | None = None
    forks_refused: int = Field(default=0, description="forks that failed at the process cap")


class SessionQuotas(BaseModel):
    """Per session. The defaults suit kernels and tuning scripts; a deployment can change them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workspace_quota_bytes: int = Field(
        default=1024**3, gt=0, description="all files of the workspace together"
    )
    # Not the per-file limit of a workspace file (`max_file_bytes`, workspace/limits.py): the kernel's
    # RLIMIT_FSIZE cannot tell a workspace file from a build's output or a profile, which may be larger.
    command_file_bytes: int = Field(
        default=256 * 1024**2, gt=0, description="largest file one command (a run, a build) may write"
    )
    files: int = Field(default=4096, gt=16, description="files and directories in the workspace")
    processes: int = Field(
        default=256, gt=8, description="processes and threads one command may hold at once"
    )
    cpu_seconds: float = Field(
        default=600.0, gt=0, description="CPU seconds one process of a command may use"
    )
    calls_per_minute: int = Field(default=240, gt=0, description="tool calls on the session per minute")


def workspace_usage(root: Path) -> tuple[int, int]:
    """(bytes, files and directories) under `root`, as the quota counts them: each file rounded up to
    a page, links not followed."""
    size = count = 0
    for parent, dirs, names in os.walk(root):
        count += len(dirs) + len(names)
        for name in names:
            try:
                length = os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
            size += -(-length // _BLOCK) * _BLOCK
    return size, count


def remaining(root: Path, quotas: SessionQuotas) -> WorkspaceQuota:
    """What a command may still add to the workspace (never negative: it may always delete)."""
    size, count = workspace_usage(root)
    return WorkspaceQuota(
        bytes=max(0, quotas.workspace_quota_bytes - size), files=max(0, quotas.files - count), present=count
    )


class CallRate:
    """Calls in the last minute, per key; `check` raises LimitExceeded past the rate."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._calls: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def check(self, key: str) -> None:
        now = time.monotonic()
        with self._lock:
            calls = self._calls.setdefault(key, deque())
            while calls and now - calls[0] > 60.0:
                calls.popleft()
            if len(calls) >= self.per_minute:
                wait = 60.0 - (now - calls[0])
                raise LimitExceeded(
                    "calls_per_minute",
                    f"this session made {self.per_minute} calls in the last minute (its limit): "
                    f"wait {wait:.0f} s and call again; the session is kept",
                )
            calls.append(now)

    def forget(self, key: str) -> None:
        with self._lock:
            self._calls.pop(key, None)

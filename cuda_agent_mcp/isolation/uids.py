"""Which unprivileged uid runs what, when this process is root, and handing directories to it.

- every agent command and build of one executor (one per session) runs as a uid of its own, drawn from
  `$CUDA_AGENT_SESSION_UIDS` (default 200000-299999, a range no distribution gives to users);
- judges and evaluation workers share one worker uid (10001, the sandbox image's user): CUDA IPC does not
  cross users (docs/DECISIONS.md), so a worker must run as its judge's uid.

A non-root process cannot switch users: everything it starts runs as itself, and `isolation` says so.
Two servers on one machine may draw the same session uid; their commands still cannot reach each other,
since each runs in namespaces of its own (no shared PID, IPC or network namespace, no common files).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Sequence
from pathlib import Path

from cuda_agent_mcp.errors import UsageError

WORKER_UID = 10001
UID_RANGE_ENV = "CUDA_AGENT_SESSION_UIDS"
_DEFAULT_RANGE = (200000, 299999)

_lock = threading.Lock()
_in_use: set[int] = set()


def switching_users() -> bool:
    """Whether commands can run as another uid than ours (only root can switch)."""
    return os.geteuid() == 0


def session_uid_range() -> tuple[int, int]:
    text = os.environ.get(UID_RANGE_ENV)
    if not text:
        return _DEFAULT_RANGE
    low, _, high = text.partition("-")
    if not (low.isdigit() and high.isdigit()) or not 1000 <= int(low) <= int(high) < 2**31:
        raise UsageError(f"${UID_RANGE_ENV} must look like 200000-299999 (uids of 1000 and up), not {text!r}")
    return int(low), int(high)


def _system_uids() -> set[int]:
    found = set()
    try:
        with open("/etc/passwd") as passwd:
            for line in passwd:
                fields = line.split(":")
                if len(fields) > 2 and fields[2].isdigit():
                    found.add(int(fields[2]))
    except OSError:
        pass
    return found


def allocate_session_uid() -> int | None:
    """A uid no other executor of this process holds, or None where we cannot switch users."""
    if not switching_users():
        return None
    low, high = session_uid_range()
    taken = _system_uids() | {WORKER_UID}
    with _lock:
        for _ in range(1000):
            uid = low + secrets.randbelow(high - low + 1)
            if uid not in _in_use and uid not in taken:
                _in_use.add(uid)
                return uid
    raise UsageError(f"no free uid left in ${UID_RANGE_ENV} ({low}-{high}): end some sessions")


def release_session_uid(uid: int) -> None:
    with _lock:
        _in_use.discard(uid)


def lend_tree(root: Path, uid: int, protected: Sequence[Path] = (), gid: int | None = None) -> None:
    """Give `root` and what is in it to `uid` (and `gid`, by default the same number), except the
    protected files (they stay ours and read-only in the view). Links are changed, never followed;
    entries already its are skipped."""
    keep = {Path(p) for p in protected}
    group = uid if gid is None else gid

    def give(path: str, info: os.stat_result) -> None:
        if (info.st_uid, info.st_gid) != (uid, group) and Path(path) not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.chown(path, uid, group, follow_symlinks=False)

    give(str(root), root.lstat())
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(parent, name)
            with contextlib.suppress(FileNotFoundError):
                give(path, os.lstat(path))


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give `root` and everything in it to `uid`:`gid`, whoever owns it now (links changed, not followed)."""
    os.chown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)

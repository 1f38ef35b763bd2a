"""A pids cgroup per untrusted process tree, where the machine lets us make one.

A process-group kill misses processes that called setsid or double-forked. A cgroup does not: every
descendant of the first process is in it whatever it does, `pids.max` caps how many there can be (a fork
bomb stops there), and `kill_all` SIGKILLs them until none is left. Needs a writable pids hierarchy
(cgroup v1 `pids`, or v2 with the pids controller enabled for children of the root); elsewhere
`PidsCgroup.create` returns None and the callers fall back to process groups, saying so in their
isolation report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from functools import cache
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/pids")
_V2 = Path("/sys/fs/cgroup")
_PARENT = "cuda-agent"
# A subtree delegated to this process by the one that started it (a judge running as the worker uid):
# its workers' cgroups go there.
DELEGATED_ENV = "CUDA_AGENT_PIDS_CGROUP"


@cache
def pids_cgroup_root() -> Path | None:
    """Where our cgroups go, probed once: a directory we can create children in, or None."""
    if delegated := os.environ.get(DELEGATED_ENV):
        return _usable(Path(delegated))
    for base in (_V1, _V2):
        if base == _V2 and "pids" not in _read(base / "cgroup.subtree_control"):
            continue
        if not (base / "cgroup.procs").exists():
            continue
        root = base / _PARENT
        probe = root / f"probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir(parents=True)
            probe.rmdir()
        except OSError:
            continue
        _sweep(root)
        return root
    return None


def _usable(root: Path) -> Path | None:
    probe = root / f"probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return None
    return root


def delegate(name: str, uid: int) -> Path | None:
    """A subtree for another uid's process tree (a judge and its workers): `<ours>/<name>/`, given to
    `uid`, with a leaf `<name>/main` for the process itself (cgroup v2 moves a process only within a
    subtree its mover may write, and keeps processes out of cgroups that have children). None where
    no pids hierarchy of ours exists."""
    root = pids_cgroup_root()
    if root is None:
        return None
    top = root / name
    try:
        top.mkdir()
        (top / "main").mkdir()
        with contextlib.suppress(OSError):  # v2 only: let the children have their own pids.max
            (top / "cgroup.subtree_control").write_text("+pids")
        for path in (top, top / "main"):
            os.chown(path, uid, uid)
            for entry in ("cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"):
                with contextlib.suppress(FileNotFoundError):
                    os.chown(path / entry, uid, uid)
    except OSError:
        remove_tree(top)
        return None
    return top


def remove_tree(top: Path) -> None:
    """Kill everything in a delegated subtree and remove it, children first."""
    for child in sorted((p for p in top.glob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        PidsCgroup(child).remove()
    PidsCgroup(top).remove()


def _sweep(root: Path, *, older_than_s: float = 300.0) -> None:
    """Remove empty cgroups left by processes that were killed before they could (a judge server killed
    with its workers cannot clean up after itself)."""
    now = time.time()
    for stale in root.glob("worker-*"):
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > older_than_s and not _read(stale / "cgroup.procs").strip():
                stale.rmdir()
    for stale in root.glob("judge-*"):  # a killed judge's subtree, once nothing runs in it
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > older_than_s and not any(
                _read(d / "cgroup.procs").strip() for d in (stale, *stale.glob("*")) if d.is_dir()
            ):
                for child in (d for d in stale.glob("*") if d.is_dir()):
                    child.rmdir()
                stale.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class PidsCgroup:
    """One cgroup holding one untrusted process tree."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, name: str, *, max_pids: int) -> PidsCgroup | None:
        root = pids_cgroup_root()
        if root is None:
            return None
        path = root / name
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        return [int(line) for line in _read(self.path / "cgroup.procs").split()]

    def forks_refused(self) -> int:
        """How often a fork failed because the cap was reached (`pids.events`, v1 and v2)."""
        for line in _read(self.path / "pids.events").splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count)
        return 0

    def kill_all(self, *, timeout_s: float = 10.0) -> None:
        """SIGKILL every member until none is left (members forking meanwhile are caught next round)."""
        deadline = time.monotonic() + timeout_s
        while (members := self.pids()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and delete the cgroup (a zombie not yet reaped can delay it briefly)."""
        self.kill_all()
        for _ in range(500):  # killed processes stay counted until their parents reap them
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)

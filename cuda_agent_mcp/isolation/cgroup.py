"""A pids cgroup per untrusted process tree: the cage nothing a candidate starts gets out of.

A process-group kill misses processes that called setsid or double-forked. A cgroup does not: every
descendant of the first process is in it whatever it does, `pids.max` caps how many there can be (a fork
bomb stops there), and killing the cgroup (cgroup v2's `cgroup.kill`, else SIGKILL to every member until
none is left) ends them all. Two hierarchies carry it:
- cgroup v1: the `pids` hierarchy at /sys/fs/cgroup/pids (the development and CI machines);
- cgroup v2: /sys/fs/cgroup with the pids controller enabled at every level down to our cages (the
  H200). A v2 directory without `+pids` in its parent's `cgroup.subtree_control` has no `pids.max`: it
  caps nothing, so it is not a cage, and it is never reported as one.
Where neither can be made (not root and nothing delegated, or no pids controller), `cage_support()` says
why; the judge then refuses to evaluate unless reduced isolation was asked for, and results say which.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

_V1 = Path("/sys/fs/cgroup/pids")
_V2 = Path("/sys/fs/cgroup")
_PARENT = "cuda-agent"
# A subtree delegated to this process by the one that started it (a judge running as the worker uid):
# its workers' cgroups go there.
DELEGATED_ENV = "CUDA_AGENT_PIDS_CGROUP"
# Set by the tool process for a judge it starts without a cage, because reduced isolation was asked for:
# the judge's workers then run in process groups, and every result says so. Without it a worker that
# cannot be caged is not started.
NO_CAGE_ENV = "CUDA_AGENT_NO_PIDS_CGROUP"
REDUCED_ISOLATION_ENV = "CUDA_AGENT_ALLOW_REDUCED_ISOLATION"

Version = Literal["v1", "v2"]


@dataclass(frozen=True)
class CageSupport:
    """Where our cages go (`root`), in which hierarchy, or why there are none here (`problem`)."""

    root: Path | None
    version: Version | None
    problem: str | None

    def describe(self) -> str:
        if self.root is None:
            return f"no pids cgroup ({self.problem})"
        return f"pids cgroup {self.version}" + (" (cgroup.kill)" if self.version == "v2" else "")


def hierarchies() -> tuple[Path, Path]:
    """The v1 pids hierarchy and the v2 root, where this machine mounts them (tests point them elsewhere)."""
    return _V1, _V2


def version_of(base: Path) -> Version | None:
    if (base / "cgroup.controllers").exists():
        return "v2"
    if (base / "tasks").exists() and (base / "cgroup.procs").exists():
        return "v1"
    return None


@cache
def cage_support() -> CageSupport:
    """Probed once per process: a directory whose children are real pids cages, or why there is none."""
    if delegated := os.environ.get(DELEGATED_ENV):
        root = Path(delegated)
        version = _version_above(root)
        problem = _probe(root, version)
        return CageSupport(root if problem is None else None, version, problem)
    problems = []
    v1, v2 = hierarchies()
    for base in (v1, v2):
        version = version_of(base)
        if version is None:
            problems.append(f"{base} is not a cgroup {'v1 pids hierarchy' if base == v1 else 'v2 mount'}")
            continue
        root = base / _PARENT
        problem = _prepare_v2(base, root) if version == "v2" else _mkdir(root)
        problem = problem or _probe(root, version)
        if problem is None:
            _sweep(root)
            return CageSupport(root, version, None)
        problems.append(problem)
    return CageSupport(None, None, "; ".join(problems))


def pids_cgroup_root() -> Path | None:
    """Where our cages go, or None where no cage can be made here (`cage_support().problem` says why)."""
    return cage_support().root


def members_file_of(pid: int) -> Path | None:
    """The `cgroup.procs` of the cgroup `pid` is in (the pids hierarchy on v1, the unified one on v2), as
    this process sees the hierarchy; None where it cannot be found. A container's processes are listed
    there by the pids of the reader's namespace: what NVML and /proc name them."""
    v1, v2 = hierarchies()
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        base = v1 if "pids" in controllers.split(",") else v2 if controllers == "" else None
        if base is None:
            continue
        members = base / path.lstrip("/") / "cgroup.procs"
        if members.is_file():
            return members
    return None


def reduced_isolation_allowed() -> bool:
    return os.environ.get(REDUCED_ISOLATION_ENV) == "1"


def _version_above(path: Path) -> Version | None:
    for parent in (path, *path.parents):
        if (found := version_of(parent)) is not None:
            return found
    return None


def _prepare_v2(base: Path, root: Path) -> str | None:
    """Enable the pids controller from the v2 root down to `root` (our subtree, which holds no process
    itself, so it may have controllers for its children)."""
    if "pids" not in _read(base / "cgroup.controllers").split():
        return f"cgroup v2 at {base} offers no pids controller"
    if "pids" not in _read(base / "cgroup.subtree_control").split():
        with contextlib.suppress(OSError):
            (base / "cgroup.subtree_control").write_text("+pids")
    if problem := _mkdir(root):
        return problem
    return _enable_pids(root)


def _enable_pids(path: Path) -> str | None:
    if "pids" in _read(path / "cgroup.subtree_control").split():
        return None
    try:
        (path / "cgroup.subtree_control").write_text("+pids")
    except OSError as exc:
        return f"cannot enable the pids controller below {path} ({exc.strerror})"
    return None


def _mkdir(path: Path) -> str | None:
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        return f"cannot create {path} ({exc.strerror})"
    return None


def _probe(root: Path, version: Version | None) -> str | None:
    """A child of `root` that has a writable `pids.max`, or why not."""
    if version is None:
        return f"{root} is not in a cgroup hierarchy"
    probe = root / f"probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"cannot create a cgroup below {root} ({exc.strerror})"
    try:
        (probe / "pids.max").write_text("8")
    except OSError:
        return f"cgroups below {root} have no pids controller (no pids.max)"
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return None


def delegate(name: str, uid: int) -> Path | None:
    """A subtree for another uid's process tree (a judge and its workers): `<ours>/<name>/`, given to
    `uid`, with a leaf `<name>/main` for the process itself (cgroup v2 moves a process only within a
    subtree its mover may write, and keeps processes out of cgroups that have children), and on v2 the
    pids controller enabled for its children. None where no pids hierarchy of ours exists."""
    support = cage_support()
    if support.root is None:
        return None
    top = support.root / name
    try:
        top.mkdir()
        (top / "main").mkdir()
        if support.version == "v2" and _enable_pids(top) is not None:
            raise OSError("no pids controller for the delegated subtree")
        for path in (top, top / "main"):
            os.chown(path, uid, uid)
            for entry in ("cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads", "cgroup.kill"):
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
    for stale in (*root.glob("worker-*"), *root.glob("probe-*"), *root.glob("target-*")):
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


def _running(pid: int) -> bool:
    """Not a zombie and not gone (a killed process stays listed until its parent reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class CageUnavailable(RuntimeError):
    """A process that would run candidate code cannot be caged here, and reduced isolation was not asked
    for: it is not started."""


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

    @classmethod
    def required(cls, name: str, *, max_pids: int) -> PidsCgroup | None:
        """A cage, or None only where reduced isolation was asked for (`NO_CAGE_ENV`, or the opt-in
        itself); otherwise CageUnavailable saying why none could be made."""
        if (cage := cls.create(name, max_pids=max_pids)) is not None:
            return cage
        if os.environ.get(NO_CAGE_ENV) == "1" or reduced_isolation_allowed():
            return None
        problem = cage_support().problem or f"cannot create the cgroup {name}"
        raise CageUnavailable(
            f"no pids cgroup can hold the candidate's processes here: {problem}; run as root, delegate a "
            f"cgroup subtree with the pids controller (${DELEGATED_ENV}), or set {REDUCED_ISOLATION_ENV}=1 "
            "to evaluate with process groups only (single-user local use)"
        )

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        return [int(line) for line in _read(self.path / "cgroup.procs").split()]

    def others(self, *expected: int) -> list[int]:
        """Running members other than `expected`: what the tree started and left running."""
        return [pid for pid in self.pids() if pid not in expected and _running(pid)]

    def forks_refused(self) -> int:
        """How often a fork failed because the cap was reached (`pids.events`, v1 and v2)."""
        for line in _read(self.path / "pids.events").splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count)
        return 0

    def kill_all(self, *, timeout_s: float = 10.0) -> None:
        """End every member: `cgroup.kill` (v2: the kernel kills the whole tree at once, forks racing it
        included), else SIGKILL to every member until none is left."""
        deadline = time.monotonic() + timeout_s
        killer = self.path / "cgroup.kill"
        while (members := [pid for pid in self.pids() if _running(pid)]) and time.monotonic() < deadline:
            try:
                killer.write_text("1")
            except OSError:
                for pid in members:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

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

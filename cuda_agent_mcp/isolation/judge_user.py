"""Who a judge server runs as, and how it is started: the worker uid in a view of its own, where it can.

`$CUDA_AGENT_JUDGE_USER`: `auto` (default) starts judges as the worker uid (10001) through
`isolation/judge_view.py` when this process is root and can make namespaces, and its workers run in
processes forked from it (Docker workers talk to the engine, which the worker uid may not); `server`
starts them as this process's own user. Either way `isolation` says which, and a judge that cannot be
started the unprivileged way is started the other, saying why (`JudgeStart.fallback`), so evaluation
keeps working.

The judge keeps its state (Triton and inductor caches, its baselines file) in a home directory of its
own, `<state>/judge-home`, owned by the worker uid; the job files a judge must read are copied there for
it (`JudgeStart.inbox`), since the tool layer's scratch directory is not the judge's to enter. A judge
started as this process's user keeps its caches in `<state>/judge-cache` (a directory of its own: a
root judge's files in the worker uid's caches would be unwritable there). Either way the judge has a
complete identity (`isolation/identity.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cuda_agent_mcp.errors import IsolationUnavailable
from cuda_agent_mcp.isolation.cgroup import (
    DELEGATED_ENV,
    NO_CAGE_ENV,
    REDUCED_ISOLATION_ENV,
    cage_support,
    delegate,
    reduced_isolation_allowed,
    remove_tree,
)
from cuda_agent_mcp.isolation.identity import compile_cache_env, identity_env
from cuda_agent_mcp.isolation.uids import WORKER_UID, lend_tree, switching_users

JUDGE_USER_ENV = "CUDA_AGENT_JUDGE_USER"
_SCRIPT = Path(__file__).with_name("judge_view.py")
_TMP_BYTES = 8 * 1024**3  # its /dev/shm holds CPU tensors shared with workers


@dataclass
class JudgeStart:
    """How one judge server is started, and what to give back when it ends."""

    argv: list[str]
    env: dict[str, str]
    uid: int | None = None  # None: this process's own user
    home: Path | None = None
    cgroup: Path | None = None
    isolation: str = "as the server's user"
    fallback: str | None = field(default=None, repr=False)

    def inbox(self) -> Path | None:
        """A fresh directory the judge may read (its job's files go there); None when it is ours."""
        if self.uid is None or self.home is None:
            return None
        path = self.home / "inbox" / uuid.uuid4().hex[:12]
        path.mkdir(parents=True, mode=0o700)
        return path

    def give(self, path: Path) -> None:
        if self.uid is not None:
            lend_tree(path, self.uid)

    def close(self) -> None:
        if self.cgroup is not None:
            remove_tree(self.cgroup)
            self.cgroup = None


def judge_home(state_dir: Path, uid: int) -> Path:
    """The judge's own directory under `state_dir` (created for `uid`, private to it)."""
    home = state_dir / "judge-home"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chown(home, uid, uid)
    os.chmod(home, 0o700)
    return home


def judge_caches(home: Path, uid: int) -> Path:
    """Where a judge running as `uid` keeps its compile caches: `home/cache`, made for it now. Best
    effort: a judge that cannot write there uses a directory of its own instead (judge/server.py)."""
    root = home / "cache"
    with contextlib.suppress(OSError):
        for path in (root, *map(Path, compile_cache_env(root).values())):
            path.mkdir(mode=0o700, exist_ok=True)
            os.chown(path, uid, uid)
    return root


def as_server_user(
    argv: list[str],
    env: dict[str, str],
    state_dir: Path,
    isolation: str,
    fallback: str | None = None,
    *,
    containers: bool = False,
) -> JudgeStart:
    """A judge started as this process's user: its home as given, its identity and its compile caches
    (persistent, in `<state>/judge-cache`) set. With `containers` (Docker workers) the candidates'
    processes are held by their containers' pids limits, so a missing pids cgroup refuses only what the
    judge would start outside a container (the sanitizer's target), not the judge."""
    private = {
        **identity_env(os.getuid(), env.get("HOME", "/tmp")),
        **compile_cache_env(state_dir / "judge-cache"),
    }
    if cage_support().root is None and containers:
        isolation = (
            f"{isolation}; candidates' processes held by their containers' pids limits (no pids cgroup "
            f"here for anything else: {cage_support().problem})"
        )
    elif cage_support().root is None:
        private[NO_CAGE_ENV] = "1"
        isolation = f"{isolation}; {uncaged(cage_support().problem)}"
    return JudgeStart(argv, {**env, **private}, isolation=isolation, fallback=fallback)


def uncaged(problem: str | None) -> str:
    """What a judge without a pids cgroup for its candidates' processes is said to be; refused with
    IsolationUnavailable unless reduced isolation was asked for (the judge would refuse each worker)."""
    if not reduced_isolation_allowed():
        raise IsolationUnavailable(
            f"no pids cgroup can hold an evaluation's processes here ({problem})",
            "run as root on a machine with a pids cgroup hierarchy (v1, or v2 with the pids controller), "
            f"or delegate a cgroup subtree with the pids controller (${DELEGATED_ENV}); for single-user "
            f"local use only, {REDUCED_ISOLATION_ENV}=1 evaluates with process groups, and results say so",
        )
    return f"candidates' processes in process groups only: no pids cgroup ({problem})"


def plan_judge_start(argv: list[str], env: dict[str, str], state_dir: Path, *, workers: str) -> JudgeStart:
    """The judge's command and environment (see the module docstring)."""
    choice = os.environ.get(JUDGE_USER_ENV, "auto")
    if choice == "server" or workers != "fork":
        why = "asked for" if choice == "server" else f"its workers run as {workers}"
        return as_server_user(
            argv, env, state_dir, f"as the server's user ({why})", containers=workers == "docker"
        )
    if not switching_users():
        return as_server_user(argv, env, state_dir, "as the server's user (not root: no other uid to take)")
    if (problem := namespaces_problem()) is not None:
        return as_server_user(argv, env, state_dir, f"as the server's user ({problem})", problem)
    uid = WORKER_UID
    home = judge_home(state_dir, uid)
    private = {
        # The worker uid has no passwd entry on most machines: its name and home are given, never looked up.
        **identity_env(uid, home),
        "TMPDIR": "/tmp",
        # Caches that outlive the judge (the next one does not compile again), in its home, which is always
        # reachable for it (below); the torch.compile baselines share them only where candidates cannot
        # reach them (Worker.trusted_compile_caches).
        **compile_cache_env(judge_caches(home, uid)),
    }
    cgroup = delegate(f"judge-{uuid.uuid4().hex[:12]}", uid)
    caged = ""
    if cgroup is not None:
        private[DELEGATED_ENV] = str(cgroup)
    else:
        private[NO_CAGE_ENV] = "1"
        caged = f"; {uncaged(cage_support().problem or 'the subtree could not be delegated')}"
    # What this interpreter imports from must stay importable for the judge: its prefixes, PYTHONPATH,
    # directories .pth files added (an editable install), and the user site, which follows HOME unless
    # its base is named.
    import site

    private["PYTHONUSERBASE"] = site.getuserbase()
    environment = {**env, **private}
    reachable = [str(home), sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)]
    reachable += [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    reachable += [p for p in (*sys.path, site.getusersitepackages()) if p and os.path.isdir(p)]
    spec = {
        "uid": uid,
        "gid": uid,
        "reachable": sorted({os.path.abspath(p) for p in reachable}, key=len),
        "tmp_bytes": _TMP_BYTES,
        "cgroup": str(cgroup) if cgroup else None,
        "argv": argv,
    }
    command = [sys.executable, "-I", "-S", str(_SCRIPT), json.dumps(spec)]
    isolation = f"as uid {uid} in its own network and mount namespaces (private /dev/shm and /tmp){caged}"
    return JudgeStart(command, environment, uid=uid, home=home, cgroup=cgroup, isolation=isolation)


@cache
def namespaces_problem() -> str | None:
    """Why a judge cannot get its own mount and network namespaces here (None: it can); probed once."""
    import subprocess

    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare(1) is missing"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run([unshare, "--mount", "--net", "--", "true"], capture_output=True, timeout=10)
        if done.returncode == 0:
            return None
        return f"mount and network namespaces are refused ({done.stderr.decode(errors='replace').strip()[-120:]})"
    return "mount and network namespaces could not be probed"
